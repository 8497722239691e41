package kube

import (
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	authzv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	fakecorev1 "k8s.io/client-go/kubernetes/typed/core/v1/fake"
	nodev1client "k8s.io/client-go/kubernetes/typed/node/v1"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// clients holds the typed clients of the API groups the tests call, as the cluster's admin or
// as the server's ServiceAccount (core/v1, authorization/v1 for the RBAC checks, node/v1 for a
// RuntimeClass), with the clientset's method names, in place of client-go's whole clientset:
// the server does not build that either (Backend.core), and its other groups would add about
// a hundred packages to the tests' build.
type clients struct {
	core  corev1client.CoreV1Interface
	authz authzv1client.AuthorizationV1Interface
	node  nodev1client.NodeV1Interface
}

func (c clients) CoreV1() corev1client.CoreV1Interface                    { return c.core }
func (c clients) AuthorizationV1() authzv1client.AuthorizationV1Interface { return c.authz }
func (c clients) NodeV1() nodev1client.NodeV1Interface                    { return c.node }

func newClients(cfg *rest.Config) (clients, error) {
	var c clients
	var err error
	if c.core, err = corev1client.NewForConfig(cfg); err != nil {
		return c, err
	}
	if c.authz, err = authzv1client.NewForConfig(cfg); err != nil {
		return c, err
	}
	c.node, err = nodev1client.NewForConfig(cfg)
	return c, err
}

// mustClients is newClients for a configuration known to be good (the clientset's
// NewForConfigOrDie).
func mustClients(cfg *rest.Config) clients {
	c, err := newClients(cfg)
	if err != nil {
		panic(err)
	}
	return c
}

// fakeCore is client-go's fake of the core/v1 client over an object tracker, wired as the fake
// clientset's NewSimpleClientset wires it (every verb to the tracker, watches from it), without
// the rest of the fake clientset.
type fakeCore struct {
	*fakecorev1.FakeCoreV1
	tracker k8stesting.ObjectTracker
}

func newFakeCore() *fakeCore {
	tr := k8stesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())
	f := &k8stesting.Fake{}
	f.AddReactor("*", "*", k8stesting.ObjectReaction(tr))
	f.AddWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := tr.Watch(a.GetResource(), a.GetNamespace())
		if err != nil {
			return false, nil, err
		}
		return true, w, nil
	})
	return &fakeCore{FakeCoreV1: &fakecorev1.FakeCoreV1{Fake: f}, tracker: tr}
}

// CoreV1 and Tracker, as the fake clientset names them.
func (f *fakeCore) CoreV1() corev1client.CoreV1Interface { return f.FakeCoreV1 }
func (f *fakeCore) Tracker() k8stesting.ObjectTracker    { return f.tracker }
