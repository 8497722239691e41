package main

import (
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"

	"github.com/moby/moby/api/types/container"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
)

// The two paths that bypass the launcher, `docker run` and the engine churn loop, take
// their hardening from the launcher's own functions (launcher.SpecOf, then
// docker.ContainerSpec), so there is no copy to drift. checkSpec still compares a
// container the launcher really made with that spec, field by field, so that what the
// engine applied shows up in the report.

const benchLabel = "bench" // value of launcher.LabelInstance on every container the bench makes

// benchSpec is the launcher's sandbox spec with its default limits and the bench's
// instance label, running cmd instead of the bootstrap.
func benchSpec(image string, cmd []string) backend.Spec {
	s := launcher.SpecOf(launcher.Options{Image: image, Instance: benchLabel})
	s.Command = cmd
	return s
}

// hardenedSpec is docker.ContainerSpec for benchSpec, without attached streams (the
// churn loop starts and waits; nothing reads or writes the program's streams).
func hardenedSpec(image, seccompOption string, cmd []string) (*container.Config, *container.HostConfig) {
	cfg, host := docker.ContainerSpec(benchSpec(image, cmd), seccompOption)
	cfg.AttachStdin, cfg.AttachStdout, cfg.AttachStderr, cfg.OpenStdin, cfg.StdinOnce = false, false, false, false, false
	return cfg, host
}

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

// dockerRunArgs is `docker run --rm -i` with the launcher's hardening, running
// `python3 -` so that the code arrives on stdin. The seccomp profile is passed as a
// file, which the CLI reads. It also returns the fields of the spec that `docker run`
// has no flag for, for the report.
func dockerRunArgs(image, profileFile string) (args, unexpressed []string) {
	cfg, host := docker.ContainerSpec(benchSpec(image, []string{"python3", "-"}), profileFile)
	return runFlags(cfg, host)
}

// runFlags translates a ContainerSpec result into `docker run` arguments, field by
// field. Fields the CLI cannot set (ReadonlyPaths: it only offers the engine's default
// list) are listed in unexpressed; a field the translation does not know makes it
// panic, so that a new field in ContainerSpec cannot be silently left out.
func runFlags(cfg *container.Config, host *container.HostConfig) (args, unexpressed []string) {
	args = []string{"run", "--rm"}
	if cfg.OpenStdin {
		args = append(args, "-i")
	}
	add := func(flag, v string) { args = append(args, flag, v) }
	add("--network", string(host.NetworkMode))
	if host.ReadonlyRootfs {
		args = append(args, "--read-only")
	}
	for _, c := range host.CapDrop {
		add("--cap-drop", c)
	}
	for _, o := range host.SecurityOpt {
		add("--security-opt", o)
	}
	add("--user", cfg.User)
	add("--memory", strconv.FormatInt(host.Memory, 10))
	add("--memory-swap", strconv.FormatInt(host.MemorySwap, 10))
	if host.PidsLimit != nil {
		add("--pids-limit", strconv.FormatInt(*host.PidsLimit, 10))
	}
	add("--cpus", strconv.FormatFloat(float64(host.NanoCPUs)/1e9, 'f', -1, 64))
	add("--log-driver", host.LogConfig.Type)
	add("--ipc", string(host.IpcMode))
	add("--shm-size", strconv.FormatInt(host.ShmSize, 10))
	if host.Init != nil {
		args = append(args, "--init="+strconv.FormatBool(*host.Init))
	}
	if host.Runtime != "" {
		add("--runtime", host.Runtime)
	}
	add("--hostname", cfg.Hostname)
	add("--workdir", cfg.WorkingDir)
	for _, k := range slices.Sorted(maps.Keys(cfg.Labels)) {
		add("--label", k+"="+cfg.Labels[k])
	}
	for _, m := range slices.Sorted(maps.Keys(host.Tmpfs)) {
		add("--tmpfs", m+":"+host.Tmpfs[m])
	}
	for _, e := range cfg.Env {
		add("-e", e)
	}
	if len(host.ReadonlyPaths) > 0 {
		unexpressed = append(unexpressed, "ReadonlyPaths")
	}
	if len(cfg.Entrypoint) != 0 || len(cfg.Cmd) == 0 {
		panic(fmt.Sprintf("runFlags: want an empty entrypoint and a command, got %q and %q", cfg.Entrypoint, cfg.Cmd))
	}
	args = append(args, "--entrypoint", cfg.Cmd[0], cfg.Image)
	return append(args, cfg.Cmd[1:]...), unexpressed
}

// specDiff lists the fields where a container the launcher made (as the engine
// reports it) differs from want, the spec it was made from: every field want sets,
// compared whole (maps entry by entry: the engine adds the image's labels), an empty
// list want sets explicitly (Entrypoint) must be empty, and the security fields whose
// zero value is the point must be empty.
func specDiff(want, got any) []string {
	return diffSet(reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem(), "")
}

func diffSet(want, got reflect.Value, prefix string) []string {
	var d []string
	t := want.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		w, g := want.Field(i), got.Field(i)
		name := prefix + f.Name
		switch {
		case f.Anonymous && w.Kind() == reflect.Struct:
			d = append(d, diffSet(w, g, prefix)...)
		case zeroIsHardening[name]:
			if !empty(g) {
				d = append(d, name)
			}
		case w.Kind() == reflect.Slice && !w.IsNil() && w.Len() == 0:
			if !empty(g) {
				d = append(d, name)
			}
		case empty(w):
		case w.Kind() == reflect.Struct:
			d = append(d, diffSet(w, g, name+".")...)
		case w.Kind() == reflect.Map:
			for _, k := range w.MapKeys() {
				if gv := g.MapIndex(k); !gv.IsValid() || !reflect.DeepEqual(w.MapIndex(k).Interface(), gv.Interface()) {
					d = append(d, fmt.Sprintf("%s[%v]", name, k))
				}
			}
		case !reflect.DeepEqual(w.Interface(), g.Interface()):
			d = append(d, name)
		}
	}
	return d
}

// zeroIsHardening are the fields whose zero value is what the hardening wants: any
// value at all there weakens the sandbox.
var zeroIsHardening = map[string]bool{
	"Privileged": true, "CapAdd": true, "GroupAdd": true, "Binds": true, "Mounts": true,
	"PortBindings": true, "PublishAllPorts": true, "ExposedPorts": true, "Devices": true,
	"DeviceCgroupRules": true, "VolumesFrom": true, "PidMode": true, "UTSMode": true,
	"UsernsMode": true, "CgroupParent": true, "ExtraHosts": true, "Links": true,
	"DNS": true, "Sysctls": true,
}

// empty: the zero value, or a slice or map with nothing in it (the engine reports
// unset lists as [] or null alike).
func empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	}
	return v.IsZero()
}
