package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

func versionString() string {
	s := fmt.Sprintf("mcp-exec %s %s %s/%s", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision", "vcs.time", "vcs.modified":
				s += fmt.Sprintf(" %s=%s", kv.Key, kv.Value)
			}
		}
	}
	return s
}
