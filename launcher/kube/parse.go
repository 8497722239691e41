package kube

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ParseLabels reads "k=v,k2=v2" (empty: none), checking keys and values as Kubernetes does.
func ParseLabels(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("want key=value pairs separated by commas, got %q", kv)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("value %q of %s: %s", v, k, strings.Join(errs, "; "))
		}
		out[k] = v
	}
	return out, nil
}

// ParseTolerations reads "key[=value][:Effect],..." (empty: none). Without a value a
// toleration matches any value of the key (operator Exists); without an effect, every effect.
func ParseTolerations(s string) ([]corev1.Toleration, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []corev1.Toleration
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		kv, effect, _ := strings.Cut(item, ":")
		k, v, hasValue := strings.Cut(kv, "=")
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("toleration %q: key: %s", item, strings.Join(errs, "; "))
		}
		t := corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffect(effect)}
		if hasValue {
			t.Operator, t.Value = corev1.TolerationOpEqual, v
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("toleration %q: effect must be NoSchedule, PreferNoSchedule or NoExecute", item)
		}
		out = append(out, t)
	}
	return out, nil
}
