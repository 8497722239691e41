package main

import (
	"maps"
	"os"
	"slices"
	"strconv"

	"github.com/moby/moby/api/types/container"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// The launcher's container specification is unexported (launcher/hardening.go), so
// the bench restates it for the two paths that bypass the launcher: `docker run` and
// the engine churn loop. checkSpec compares this copy with a container the launcher
// really made, so that a drift shows up in the report instead of skewing it.

// Sandbox limits: the launcher's defaults.
const (
	memoryBytes = 256 * launcher.MiB
	pidsLimit   = 128
	nanoCPUs    = 1e9
	tmpfsBytes  = 64 * launcher.MiB
	sandboxUser = "65532:65532"
	benchLabel  = "bench" // value of launcher.LabelInstance on every container the bench makes
)

var (
	tmpfsOpts  = "rw,noexec,nosuid,nodev,size=" + strconv.Itoa(tmpfsBytes) + ",mode=1777"
	sandboxEnv = launcher.SandboxEnv()
	labels     = map[string]string{launcher.LabelRole: "sandbox", launcher.LabelInstance: benchLabel}
)

// writeProfile writes the profile to a temporary file for `docker run --security-opt`.
func writeProfile(profile string) (string, error) {
	f, err := os.CreateTemp("", "mcp-exec-bench-seccomp-*.json")
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(profile); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), f.Close()
}

// tmpfsMounts are the sandbox's tmpfs mounts: the private /tmp, and read-only ones
// over /run and /var/tmp (which Podman would otherwise make writable).
func tmpfsMounts() map[string]string {
	return map[string]string{
		"/tmp":     tmpfsOpts,
		"/run":     "ro,noexec,nosuid,nodev,size=65536",
		"/var/tmp": "ro,noexec,nosuid,nodev,size=65536",
	}
}

// hardenedSpec is containerSpec's configuration running cmd, without attached streams.
func hardenedSpec(image, profile string, cmd []string) (*container.Config, *container.HostConfig) {
	pids := int64(pidsLimit)
	cfg := &container.Config{
		Image:           image,
		User:            sandboxUser,
		Cmd:             cmd,
		Entrypoint:      []string{},
		Env:             slices.Clone(sandboxEnv),
		WorkingDir:      "/tmp",
		Hostname:        "sandbox",
		NetworkDisabled: true,
		Labels:          labels,
	}
	host := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true", "seccomp=" + profile},
		LogConfig:      container.LogConfig{Type: "none"},
		Tmpfs:          tmpfsMounts(),
		IpcMode:        "private",
		ShmSize:        tmpfsBytes,
		Init:           new(false),
		Resources: container.Resources{
			Memory:     memoryBytes,
			MemorySwap: memoryBytes,
			NanoCPUs:   nanoCPUs,
			PidsLimit:  &pids,
		},
	}
	return cfg, host
}

// dockerRunArgs is `docker run` with the same hardening, running `python3 -` so that
// the code arrives on stdin.
func dockerRunArgs(image, profileFile string) []string {
	args := []string{
		"run", "--rm", "-i",
		"--network", "none",
		"--read-only",
		"--cap-drop", "ALL",
		"--security-opt", "no-new-privileges",
		"--security-opt", "seccomp=" + profileFile,
		"--user", sandboxUser,
		"--memory", "256m", "--memory-swap", "256m",
		"--pids-limit", strconv.Itoa(pidsLimit),
		"--cpus", "1",
		"--log-driver", "none",
		"--ipc", "private", "--shm-size", "64m",
		"--hostname", "sandbox",
		"--workdir", "/tmp",
		"--label", launcher.LabelRole + "=sandbox",
		"--label", launcher.LabelInstance + "=" + benchLabel,
	}
	mounts := tmpfsMounts()
	for _, m := range slices.Sorted(maps.Keys(mounts)) {
		args = append(args, "--tmpfs", m+":"+mounts[m])
	}
	for _, e := range sandboxEnv {
		args = append(args, "-e", e)
	}
	return append(args, "--entrypoint", "python3", image, "-")
}

// specDiff lists the hardening fields where a container the launcher made differs
// from hardenedSpec; empty means the bench's copy is faithful.
func specDiff(got *container.HostConfig, gotCfg *container.Config, profile string) []string {
	_, want := hardenedSpec("", profile, nil)
	var d []string
	check := func(name string, ok bool) {
		if !ok {
			d = append(d, name)
		}
	}
	check("NetworkMode", got.NetworkMode == want.NetworkMode)
	check("ReadonlyRootfs", got.ReadonlyRootfs == want.ReadonlyRootfs)
	check("CapDrop", slices.Equal(got.CapDrop, want.CapDrop))
	check("SecurityOpt", slices.Equal(got.SecurityOpt, want.SecurityOpt))
	check("LogConfig", got.LogConfig.Type == want.LogConfig.Type)
	check("Tmpfs", maps.Equal(got.Tmpfs, want.Tmpfs))
	check("Init", got.Init != nil && !*got.Init)
	check("Privileged", !got.Privileged)
	check("IpcMode", got.IpcMode == want.IpcMode)
	check("ShmSize", got.ShmSize == want.ShmSize)
	check("Memory", got.Memory == want.Memory && got.MemorySwap == want.MemorySwap)
	check("NanoCPUs", got.NanoCPUs == want.NanoCPUs)
	check("PidsLimit", got.PidsLimit != nil && *got.PidsLimit == *want.PidsLimit)
	check("User", gotCfg.User == sandboxUser)
	check("Env", slices.Equal(gotCfg.Env, sandboxEnv))
	return d
}
