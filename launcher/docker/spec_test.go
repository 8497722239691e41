package docker

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// specTestProfile stands in for the seccomp profile JSON: ContainerSpec only embeds it.
const specTestProfile = "PROFILE"

// specWantEnv is the complete sandbox environment, spelled out here rather than taken
// from sandboxEnv so that a change to it has to be made twice.
var specWantEnv = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/tmp",
	"LANG=C.UTF-8",
	"MPLBACKEND=Agg",
	"MPLCONFIGDIR=/tmp/.config/matplotlib",
	"XDG_CACHE_HOME=/tmp/.cache",
	"XDG_CONFIG_HOME=/tmp/.config",
	"PYTHONDONTWRITEBYTECODE=1",
	"TERM=dumb",
	"container=mcp-exec",
}

// specCustomOptions overrides every option that reaches the container.
func specCustomOptions() Options {
	return withDefaults(Options{
		Image:          "example.test/sandbox:v9",
		Python:         "/usr/bin/python3.12",
		Memory:         512 * MiB,
		Pids:           64,
		CPUs:           0.5,
		TmpfsSize:      16 * MiB,
		Runtime:        "crun",
		MaxOutputBytes: 4096,
		MaxFileBytes:   1 * MiB,
		MaxFilesBytes:  2 * MiB,
		Instance:       "ci-42",
		Preload:        []string{"numpy", "pandas"},
	})
}

// specLimits are the values that depend on Options.
type specLimits struct {
	memory, pids, nanoCPUs, tmpfs int64
	runtime                       string
}

func specDefaultLimits() specLimits {
	return specLimits{memory: 256 * MiB, pids: 128, nanoCPUs: 1_000_000_000, tmpfs: 64 * MiB}
}

func specCustomLimits() specLimits {
	return specLimits{memory: 512 * MiB, pids: 64, nanoCPUs: 500_000_000, tmpfs: 16 * MiB, runtime: "crun"}
}

// specTmpfsFlags splits a tmpfs option string into its comma-separated options.
func specTmpfsFlags(t *testing.T, opts string) []string {
	t.Helper()
	if opts == "" {
		t.Fatal("tmpfs options are empty")
	}
	return strings.Split(opts, ",")
}

// assertSpecHardened checks every isolation setting that must hold whatever the
// options are, and the limits that derive from them.
func assertSpecHardened(t *testing.T, o Options, cfg *container.Config, host *container.HostConfig, lim specLimits) {
	t.Helper()

	// No core dumps, soft and hard.
	if !slices.ContainsFunc(host.Ulimits, func(u *container.Ulimit) bool { return *u == (container.Ulimit{Name: "core"}) }) {
		t.Errorf("Ulimits: got %s, want core=0:0 among them", ulimits(host.Ulimits))
	}

	// Network.
	if host.NetworkMode != "none" {
		t.Errorf("NetworkMode: got %q, want %q", host.NetworkMode, "none")
	}
	if !cfg.NetworkDisabled {
		t.Errorf("NetworkDisabled: got false, want true")
	}
	if len(cfg.ExposedPorts) != 0 || len(host.PortBindings) != 0 || host.PublishAllPorts {
		t.Errorf("ports: got ExposedPorts %v, PortBindings %v, PublishAllPorts %v, want none",
			cfg.ExposedPorts, host.PortBindings, host.PublishAllPorts)
	}
	if len(host.DNS) != 0 || len(host.ExtraHosts) != 0 || len(host.Links) != 0 {
		t.Errorf("name resolution: got DNS %v, ExtraHosts %v, Links %v, want none", host.DNS, host.ExtraHosts, host.Links)
	}

	// Privileges.
	if host.Privileged {
		t.Errorf("Privileged: got true, want false")
	}
	if diff := cmp.Diff([]string{"ALL"}, host.CapDrop); diff != "" {
		t.Errorf("CapDrop mismatch (-want +got):\n%s", diff)
	}
	if len(host.CapAdd) != 0 {
		t.Errorf("CapAdd: got %q, want none", host.CapAdd)
	}
	if cfg.User != "65532:65532" {
		t.Errorf("User: got %q, want %q", cfg.User, "65532:65532")
	}
	if len(host.GroupAdd) != 0 {
		t.Errorf("GroupAdd: got %q, want none", host.GroupAdd)
	}
	wantSec := []string{"no-new-privileges:true", "seccomp=" + specTestProfile}
	if diff := cmp.Diff(wantSec, host.SecurityOpt); diff != "" {
		t.Errorf("SecurityOpt mismatch (-want +got):\n%s", diff)
	}
	// A non-nil empty list would unmask /proc/kcore and friends.
	if host.MaskedPaths != nil {
		t.Errorf("MaskedPaths: got %q, want nil (the engine's defaults)", host.MaskedPaths)
	}
	// ReadonlyPaths replaces the engine's list: Docker's defaults must all be in it,
	// and the cgroup tmpfs before the controller mounts its bind copies.
	for _, p := range []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
		"/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu"} {
		if !slices.Contains(host.ReadonlyPaths, p) {
			t.Errorf("ReadonlyPaths: %q lacks %s", host.ReadonlyPaths, p)
		}
	}
	if i := slices.Index(host.ReadonlyPaths, "/sys/fs/cgroup"); i < 0 || slices.ContainsFunc(host.ReadonlyPaths[:i], func(p string) bool {
		return strings.HasPrefix(p, "/sys/fs/cgroup/")
	}) {
		t.Errorf("ReadonlyPaths: %q, want /sys/fs/cgroup before every path under it", host.ReadonlyPaths)
	}

	// Namespaces: private, never shared with the host or another container.
	if host.IpcMode != "private" {
		t.Errorf("IpcMode: got %q, want %q", host.IpcMode, "private")
	}
	for name, mode := range map[string]string{
		"PidMode":      string(host.PidMode),
		"UTSMode":      string(host.UTSMode),
		"UsernsMode":   string(host.UsernsMode),
		"CgroupnsMode": string(host.CgroupnsMode),
		"Cgroup":       string(host.Cgroup),
	} {
		if mode != "" {
			t.Errorf("%s: got %q, want the engine's private default (\"\")", name, mode)
		}
	}
	if len(host.Sysctls) != 0 {
		t.Errorf("Sysctls: got %v, want none", host.Sysctls)
	}

	// Filesystem.
	if !host.ReadonlyRootfs {
		t.Errorf("ReadonlyRootfs: got false, want true")
	}
	if len(host.Binds) != 0 || len(host.Mounts) != 0 || len(host.VolumesFrom) != 0 || len(cfg.Volumes) != 0 || host.VolumeDriver != "" {
		t.Errorf("mounts: got Binds %q, Mounts %v, VolumesFrom %q, Volumes %v, VolumeDriver %q, want none",
			host.Binds, host.Mounts, host.VolumesFrom, cfg.Volumes, host.VolumeDriver)
	}
	if len(host.Devices) != 0 || len(host.DeviceRequests) != 0 || len(host.DeviceCgroupRules) != 0 {
		t.Errorf("devices: got %v, %v, %q, want none", host.Devices, host.DeviceRequests, host.DeviceCgroupRules)
	}
	if tmp, ok := host.Tmpfs["/tmp"]; !ok {
		t.Errorf("Tmpfs: got %v, want a mount at /tmp", host.Tmpfs)
	} else {
		flags := specTmpfsFlags(t, tmp)
		wantSize := "size=" + strconv.FormatInt(lim.tmpfs, 10)
		for _, want := range []string{"rw", wantSize, "mode=1777"} {
			if !slices.Contains(flags, want) {
				t.Errorf("Tmpfs[/tmp]: got %q, want it to contain %q", tmp, want)
			}
		}
	}
	// Every tmpfs is noexec, nosuid, nodev and bounded; only /tmp is writable.
	for path, opts := range host.Tmpfs {
		flags := specTmpfsFlags(t, opts)
		for _, want := range []string{"noexec", "nosuid", "nodev"} {
			if !slices.Contains(flags, want) {
				t.Errorf("Tmpfs[%s]: got %q, want it to contain %q", path, opts, want)
			}
		}
		// Mount options are applied in order: a later "exec" would undo "noexec".
		for _, bad := range []string{"exec", "suid", "dev"} {
			if slices.Contains(flags, bad) {
				t.Errorf("Tmpfs[%s]: got %q, want no %q", path, opts, bad)
			}
		}
		if path != "/tmp" && (!slices.Contains(flags, "ro") || slices.Contains(flags, "rw")) {
			t.Errorf("Tmpfs[%s]: got %q, want read-only (only /tmp is writable)", path, opts)
		}
		if path == "/tmp" && slices.Contains(flags, "ro") {
			t.Errorf("Tmpfs[/tmp]: got %q, want rw only", opts)
		}
		if n := len(slices.DeleteFunc(slices.Clone(flags), func(f string) bool { return !strings.HasPrefix(f, "size=") })); n != 1 {
			t.Errorf("Tmpfs[%s]: got %q with %d size options, want exactly 1", path, opts, n)
		}
	}
	if host.ShmSize != lim.tmpfs {
		t.Errorf("ShmSize: got %d, want %d", host.ShmSize, lim.tmpfs)
	}
	if cfg.WorkingDir != "/tmp" {
		t.Errorf("WorkingDir: got %q, want %q", cfg.WorkingDir, "/tmp")
	}

	// Resources.
	if host.Memory != lim.memory {
		t.Errorf("Memory: got %d, want %d", host.Memory, lim.memory)
	}
	if host.MemorySwap != lim.memory {
		t.Errorf("MemorySwap: got %d, want %d (equal to Memory: no swap)", host.MemorySwap, lim.memory)
	}
	if host.PidsLimit == nil {
		t.Errorf("PidsLimit: got nil, want %d", lim.pids)
	} else if *host.PidsLimit != lim.pids {
		t.Errorf("PidsLimit: got %d, want %d", *host.PidsLimit, lim.pids)
	}
	if host.NanoCPUs != lim.nanoCPUs {
		t.Errorf("NanoCPUs: got %d, want %d", host.NanoCPUs, lim.nanoCPUs)
	}
	if host.OomKillDisable != nil && *host.OomKillDisable {
		t.Errorf("OomKillDisable: got true, want unset or false")
	}
	if host.OomScoreAdj < 0 {
		t.Errorf("OomScoreAdj: got %d, want >= 0", host.OomScoreAdj)
	}
	if host.CgroupParent != "" {
		t.Errorf("CgroupParent: got %q, want the engine's default", host.CgroupParent)
	}
	if host.Runtime != lim.runtime {
		t.Errorf("Runtime: got %q, want %q", host.Runtime, lim.runtime)
	}

	// Lifecycle and streams.
	if host.LogConfig.Type != "none" {
		t.Errorf("LogConfig.Type: got %q, want %q", host.LogConfig.Type, "none")
	}
	if host.Init == nil {
		t.Errorf("Init: got nil (the engine's default), want false")
	} else if *host.Init {
		t.Errorf("Init: got true, want false")
	}
	if host.AutoRemove {
		t.Errorf("AutoRemove: got true, want false")
	}
	if host.RestartPolicy.Name != "" && host.RestartPolicy.Name != "no" {
		t.Errorf("RestartPolicy: got %q, want none", host.RestartPolicy.Name)
	}
	if !cfg.OpenStdin || !cfg.StdinOnce || !cfg.AttachStdin {
		t.Errorf("OpenStdin, StdinOnce, AttachStdin: got %v, %v, %v, want all true", cfg.OpenStdin, cfg.StdinOnce, cfg.AttachStdin)
	}
	if !cfg.AttachStdout || !cfg.AttachStderr {
		t.Errorf("AttachStdout, AttachStderr: got %v, %v, want both true", cfg.AttachStdout, cfg.AttachStderr)
	}
	if cfg.Tty {
		t.Errorf("Tty: got true, want false")
	}
	if cfg.Healthcheck != nil {
		t.Errorf("Healthcheck: got %+v, want nil", cfg.Healthcheck)
	}

	// What runs, and with what.
	if cfg.Image != o.Image {
		t.Errorf("Image: got %q, want %q", cfg.Image, o.Image)
	}
	// nil would mean the image's entrypoint; an empty list means none.
	if cfg.Entrypoint == nil || len(cfg.Entrypoint) != 0 {
		t.Errorf("Entrypoint: got %#v, want []string{}", cfg.Entrypoint)
	}
	if diff := cmp.Diff(specWantEnv, cfg.Env); diff != "" {
		t.Errorf("Env mismatch (-want +got):\n%s", diff)
	}
	wantLabels := map[string]string{LabelRole: "sandbox", LabelInstance: o.Instance}
	if diff := cmp.Diff(wantLabels, cfg.Labels); diff != "" {
		t.Errorf("Labels mismatch (-want +got):\n%s", diff)
	}
}

func TestHardeningSpec(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		lim  specLimits
	}{
		{"defaults", withDefaults(Options{}), specDefaultLimits()},
		{"custom", specCustomOptions(), specCustomLimits()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, host := specOf(tt.opts, specTestProfile)
			assertSpecHardened(t, tt.opts, cfg, host, tt.lim)
		})
	}
}

// TestHardeningSpecDefaults pins the literal defaults, independently of withDefaults'
// constants: 256 MiB, 128 pids, 1 CPU, 64 MiB tmpfs.
func TestHardeningSpecDefaults(t *testing.T) {
	_, host := specOf(Options{}, specTestProfile)
	if host.Memory != 268435456 || host.MemorySwap != 268435456 {
		t.Errorf("Memory, MemorySwap: got %d, %d, want 268435456, 268435456", host.Memory, host.MemorySwap)
	}
	if host.PidsLimit == nil || *host.PidsLimit != 128 {
		t.Errorf("PidsLimit: got %v, want 128", host.PidsLimit)
	}
	if host.NanoCPUs != 1e9 {
		t.Errorf("NanoCPUs: got %d, want 1000000000", host.NanoCPUs)
	}
	if want := "rw,noexec,nosuid,nodev,size=67108864,mode=1777"; host.Tmpfs["/tmp"] != want {
		t.Errorf("Tmpfs[/tmp]: got %q, want %q", host.Tmpfs["/tmp"], want)
	}
	if host.Runtime != "" {
		t.Errorf("Runtime: got %q, want \"\" (the engine's default)", host.Runtime)
	}
}

// TestHardeningSpecEnvIsolated checks that nothing of the server's environment
// reaches the sandbox.
func TestHardeningSpecEnvIsolated(t *testing.T) {
	const key, value = "MCP_EXEC_TEST_CANARY", "canary-5d1e0b7a-must-not-leak"
	t.Setenv(key, value)
	t.Setenv("HOME", "/home/canary-home")
	t.Setenv("PATH", "/canary/bin:"+os.Getenv("PATH"))

	for _, o := range []Options{withDefaults(Options{}), specCustomOptions()} {
		cfg, _ := specOf(o, specTestProfile)
		for _, e := range cfg.Env {
			if strings.Contains(e, key) || strings.Contains(e, "canary") {
				t.Errorf("Env: got %q, want nothing from the server's environment", e)
			}
		}
		for _, e := range os.Environ() {
			if slices.Contains(cfg.Env, e) && !slices.Contains(specWantEnv, e) {
				t.Errorf("Env: got %q from the server's environment, want only the sandbox's", e)
			}
		}
		if diff := cmp.Diff(specWantEnv, cfg.Env); diff != "" {
			t.Errorf("Env mismatch (-want +got):\n%s", diff)
		}
	}
}

// TestHardeningSpecPure checks that equal options give equal specs, and that specs
// share no mutable state with each other or with package variables.
func TestHardeningSpecPure(t *testing.T) {
	o := specCustomOptions()
	cfg1, host1 := specOf(o, specTestProfile)
	cfg2, host2 := specOf(o, specTestProfile)
	if diff := cmp.Diff(cfg1, cfg2); diff != "" {
		t.Errorf("Config differs between two calls (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff(host1, host2); diff != "" {
		t.Errorf("HostConfig differs between two calls (-first +second):\n%s", diff)
	}

	// Scribble over the first spec; a fresh one must not change.
	cfg1.Env[0] = "PATH=/evil"
	cfg1.Env = append(cfg1.Env[:1], "EXTRA=1")
	cfg1.Cmd[0] = "evil"
	cfg1.Labels[LabelInstance] = "evil"
	host1.CapDrop[0] = "NONE"
	host1.SecurityOpt[0] = "seccomp=unconfined"
	host1.Tmpfs["/tmp"] = "rw,exec"
	if host1.PidsLimit != nil && host1.Init != nil {
		*host1.PidsLimit = -1
		*host1.Init = true
	}

	cfg3, host3 := specOf(specCustomOptions(), specTestProfile)
	if diff := cmp.Diff(cfg2, cfg3); diff != "" {
		t.Errorf("Config changed after mutating an earlier spec (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(host2, host3); diff != "" {
		t.Errorf("HostConfig changed after mutating an earlier spec (-before +after):\n%s", diff)
	}
	if host2.PidsLimit == nil || *host2.PidsLimit != 64 || !slices.Equal(host2.CapDrop, []string{"ALL"}) {
		t.Errorf("second spec: got PidsLimit %v, CapDrop %q, want 64, [ALL]: it shares memory with the first", host2.PidsLimit, host2.CapDrop)
	}
	if diff := cmp.Diff(specWantEnv, launcher.SandboxEnv()); diff != "" {
		t.Errorf("sandboxEnv was modified through a spec (-want +got):\n%s", diff)
	}
}

// TestHardeningSpecExact compares the whole spec for the default options with the
// expected one, so that any field set (or dropped) without updating this test fails.
func TestHardeningSpecExact(t *testing.T) {
	pids := int64(128)
	wantCfg := &container.Config{
		Hostname:        "sandbox",
		User:            "65532:65532",
		AttachStdin:     true,
		AttachStdout:    true,
		AttachStderr:    true,
		OpenStdin:       true,
		StdinOnce:       true,
		Env:             specWantEnv,
		Cmd:             launcher.SpecOf(Options{}).Command, // pinned by the launcher's TestSpecCommand
		Image:           DefaultImage,
		WorkingDir:      "/tmp",
		Entrypoint:      []string{},
		NetworkDisabled: true,
		Labels:          map[string]string{LabelRole: "sandbox", LabelInstance: "default"},
	}
	wantHost := &container.HostConfig{
		LogConfig:      container.LogConfig{Type: "none"},
		NetworkMode:    "none",
		CapDrop:        []string{"ALL"},
		IpcMode:        "private",
		ReadonlyRootfs: true,
		SecurityOpt:    []string{"no-new-privileges:true", "seccomp=PROFILE"},
		Tmpfs: map[string]string{
			"/tmp":     "rw,noexec,nosuid,nodev,size=67108864,mode=1777",
			"/run":     "ro,noexec,nosuid,nodev,size=65536",
			"/var/tmp": "ro,noexec,nosuid,nodev,size=65536",
		},
		ReadonlyPaths: readonlyPaths,
		ShmSize:       64 * MiB,
		Init:          new(false),
		Resources: container.Resources{
			Memory:     256 * MiB,
			MemorySwap: 256 * MiB,
			NanoCPUs:   1e9,
			PidsLimit:  &pids,
			Ulimits:    []*container.Ulimit{{Name: "core", Soft: 0, Hard: 0}},
		},
	}
	cfg, host := specOf(Options{}, specTestProfile)
	if diff := cmp.Diff(wantCfg, cfg); diff != "" {
		t.Errorf("Config mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantHost, host); diff != "" {
		t.Errorf("HostConfig mismatch (-want +got):\n%s", diff)
	}
}

// TestHardeningSpecCPUsAlwaysLimited checks that a positive CPU option never turns
// into NanoCPUs 0, which the engine reads as "no CPU limit".
func TestHardeningSpecCPUsAlwaysLimited(t *testing.T) {
	for _, cpus := range []float64{0.01, 0.5, 2.5, 1e-10, 5e-10} {
		o := Options{CPUs: cpus}
		_, host := specOf(o, specTestProfile)
		if host.NanoCPUs <= 0 {
			t.Errorf("CPUs %g: got NanoCPUs %d (no CPU limit), want a positive quota", cpus, host.NanoCPUs)
		}
	}
}

// Options, and the names below, are the launcher's: the spec under test is the one a
// launcher with these options gives every sandbox.
type Options = launcher.Options

const (
	MiB           = launcher.MiB
	DefaultImage  = launcher.DefaultImage
	LabelRole     = launcher.LabelRole
	LabelInstance = launcher.LabelInstance
)

// withDefaults is o with the launcher's defaults applied.
func withDefaults(o Options) Options {
	l, err := launcher.New(nil, o)
	if err != nil {
		panic(err)
	}
	return l.Options()
}

func specOf(o Options, profile string) (*container.Config, *container.HostConfig) {
	return ContainerSpec(launcher.SpecOf(o), profile)
}

// TestHardeningSpecGVisor: under runsc the program's process limit is RLIMIT_NPROC
// (counted per sandbox by gVisor's kernel) and the host's pids cgroup a backstop sized
// for gVisor's own tasks; under any other runtime there is no nproc limit (on the
// host it would count every sandbox's uid 65532 together).
func TestHardeningSpecGVisor(t *testing.T) {
	for _, rt := range []string{"runsc", "runsc-kvm", "gvisor"} {
		o := specCustomOptions()
		o.Runtime, o.Pids = rt, 100
		if !o.GVisor() {
			t.Fatalf("%s: GVisor() = false, want true", rt)
		}
		_, host := specOf(o, specTestProfile)
		if len(host.Ulimits) != 2 || *host.Ulimits[0] != (container.Ulimit{Name: "core"}) ||
			*host.Ulimits[1] != (container.Ulimit{Name: "nproc", Soft: 100, Hard: 100}) {
			t.Errorf("%s: Ulimits %s, want core=0:0 nproc=100:100", rt, ulimits(host.Ulimits))
		}
		if host.PidsLimit == nil || *host.PidsLimit != backend.GVisorHostPids(100) || backend.GVisorHostPids(100) <= 100 {
			t.Errorf("%s: PidsLimit %v, want %d (above Pids)", rt, host.PidsLimit, backend.GVisorHostPids(100))
		}
	}
	for _, rt := range []string{"", "runc", "crun"} {
		o := specCustomOptions()
		o.Runtime, o.Pids = rt, 100
		_, host := specOf(o, specTestProfile)
		if o.GVisor() || len(host.Ulimits) != 1 || *host.Ulimits[0] != (container.Ulimit{Name: "core"}) || host.PidsLimit == nil || *host.PidsLimit != 100 {
			t.Errorf("%q: GVisor %v, Ulimits %s, PidsLimit %v, want false, core=0:0, 100", rt, o.GVisor(), ulimits(host.Ulimits), host.PidsLimit)
		}
	}
}

func ulimits(us []*container.Ulimit) string {
	var b strings.Builder
	for _, u := range us {
		fmt.Fprintf(&b, "%s=%d:%d ", u.Name, u.Soft, u.Hard)
	}
	return strings.TrimSpace(b.String())
}

// TestWithoutCore: for Podman the core ulimit is dropped (its compatible API would
// replace containers.conf's default ulimits with it) and nothing else is.
func TestWithoutCore(t *testing.T) {
	_, host := ContainerSpec(backend.Spec{Pids: 64, Runtime: "runsc"}, "")
	got := withoutCore(host.Ulimits)
	if len(got) != len(host.Ulimits)-1 {
		t.Fatalf("withoutCore(%v): got %d ulimits, want %d", host.Ulimits, len(got), len(host.Ulimits)-1)
	}
	for _, u := range got {
		if u.Name == "core" {
			t.Errorf("withoutCore kept %v", u)
		}
	}
}
