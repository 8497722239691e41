package e2e_test

import (
	"context"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/kube"
)

// TestKubeRestartReapsOrphans is TestRestartReapsOrphans on the Kubernetes backend: a server
// SIGKILLed mid-exec leaves its pod; restarted with the same instance it deletes that pod
// before it serves, never another instance's; after SIGTERM no pod of it is left. It runs when
// MCP_EXEC_TEST_KUBECONFIG names a test cluster (scripts/k8s/ci.sh), with the namespace of
// docs/deploy/kubernetes applied (the launcher/kube tests apply it).
func TestKubeRestartReapsOrphans(t *testing.T) {
	kc, rc := e2e.KubeCluster(t)
	admin := corev1client.NewForConfigOrDie(rc)
	const ns = kube.DefaultNamespace // docs/deploy/kubernetes' sandbox namespace
	bin := e2e.Build(t)
	instance := "test-crash-reap-kube"

	// A pod of another instance, which the restart must not touch.
	be, err := kube.New(rc, kube.Options{Namespace: ns, PullPolicy: "Never"}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	other, err := be.Create(t.Context(), launcher.SpecOf(launcher.Options{Image: launcher.DefaultImage, Instance: instance + "-other"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.Remove(context.Background(), other) })

	start := func() *crashServer {
		return crashStart(t, bin, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")},
			"--instance", instance, "--pool-size", "0", "--log-format", "json",
			"--backend", "kubernetes", "--kubeconfig", kc, "--kube-namespace", ns, "--kube-image-pull-policy", "Never")
	}
	list := crashList(t, be, instance)

	// 60 s for the pod to appear, then 2 s for the exec to start in it.
	orphan := crashMidExec(t, start, list, 60*time.Second, 2*time.Second)
	s := start()
	crashWaitLog(t, s.log, "serving")
	if slices.Contains(list(), orphan) {
		t.Errorf("after restart: the orphan %s is still there, want it deleted before serving", orphan)
	}
	if _, err := admin.Pods(ns).Get(t.Context(), other, metav1.GetOptions{}); err != nil {
		t.Errorf("another instance's pod: %v, want it untouched", err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	for deadline := time.Now().Add(30 * time.Second); len(list()) != 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after SIGTERM: pods %v left, want none", list())
		}
	}
}
