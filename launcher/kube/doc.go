// Package kube is the Kubernetes backend: one hardened Pod per sandbox, created through the
// API server and attached over the API (client-go's remotecommand), never through kubectl.
package kube
