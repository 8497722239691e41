package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestParseLabels(t *testing.T) {
	got, err := ParseLabels("pool=sandbox, example.com/team=ai")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"pool": "sandbox", "example.com/team": "ai"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"novalue", "a b=c", "a=b c", "a=-x"} {
		if _, err := ParseLabels(bad); err == nil {
			t.Errorf("ParseLabels(%q): got no error", bad)
		}
	}
}

func TestParseTolerations(t *testing.T) {
	got, err := ParseTolerations("sandbox=gvisor:NoSchedule,dedicated")
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.Toleration{
		{Key: "sandbox", Operator: corev1.TolerationOpEqual, Value: "gvisor", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Operator: corev1.TolerationOpExists},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"k:Sometimes", "a b", ":NoSchedule"} {
		if _, err := ParseTolerations(bad); err == nil {
			t.Errorf("ParseTolerations(%q): got no error", bad)
		}
	}
}
