package main

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
)

// TestRunFlags: the `docker run` baseline carries every hardening field of
// docker.ContainerSpec that the CLI can express, and names the one it cannot.
func TestRunFlags(t *testing.T) {
	args, unexpressed := dockerRunArgs("img:v1", "/tmp/profile.json")
	s := " " + strings.Join(args, " ") + " "
	for _, want := range []string{
		" run --rm -i ", " --network none ", " --read-only ", " --cap-drop ALL ",
		" --security-opt no-new-privileges:true ", " --security-opt seccomp=/tmp/profile.json ",
		" --user 65532:65532 ", " --memory 268435456 ", " --memory-swap 268435456 ",
		" --pids-limit 128 ", " --cpus 1 ", " --log-driver none ", " --ipc private ",
		" --shm-size 67108864 ", " --init=false ", " --hostname sandbox ", " --workdir /tmp ",
		" --label dev.mcp-exec.instance=bench ", " --label dev.mcp-exec.role=sandbox ",
		" --tmpfs /tmp:rw,noexec,nosuid,nodev,size=67108864,mode=1777 ",
		" --tmpfs /run:ro,noexec,nosuid,nodev,size=65536 ", " --tmpfs /var/tmp:ro,noexec,nosuid,nodev,size=65536 ",
		" -e TERM=dumb ", " --entrypoint python3 img:v1 - ",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("docker run args lack %q:\n%s", want, s)
		}
	}
	for _, e := range launcher.SandboxEnv() {
		if !slices.Contains(args, e) {
			t.Errorf("docker run args lack the environment entry %q", e)
		}
	}
	if diff := cmp.Diff([]string{"ReadonlyPaths"}, unexpressed); diff != "" {
		t.Errorf("unexpressed fields (-want +got):\n%s", diff)
	}
}

// TestSpecDiff: identical specs do not differ; a change in any field the spec sets, an
// entrypoint, or a weakening field left at zero by the spec does; labels the engine
// adds from the image do not.
func TestSpecDiff(t *testing.T) {
	want := func() (*container.Config, *container.HostConfig) {
		return docker.ContainerSpec(launcher.SpecOf(launcher.Options{}), "PROFILE")
	}
	wc, wh := want()
	if d := slices.Concat(specDiff(wc, wc), specDiff(wh, wh)); len(d) != 0 {
		t.Fatalf("a spec differs from itself in %q", d)
	}
	tests := []struct {
		name   string
		change func(*container.Config, *container.HostConfig)
		want   []string
	}{
		{"image labels added", func(c *container.Config, _ *container.HostConfig) { c.Labels["org.opencontainers.image.title"] = "x" }, nil},
		{"label changed", func(c *container.Config, _ *container.HostConfig) { c.Labels[launcher.LabelInstance] = "other" }, []string{"Labels[dev.mcp-exec.instance]"}},
		{"entrypoint", func(c *container.Config, _ *container.HostConfig) { c.Entrypoint = []string{"sh"} }, []string{"Entrypoint"}},
		{"env", func(c *container.Config, _ *container.HostConfig) { c.Env = append(c.Env, "X=1") }, []string{"Env"}},
		{"capabilities", func(_ *container.Config, h *container.HostConfig) { h.CapDrop = nil }, []string{"CapDrop"}},
		{"cap add", func(_ *container.Config, h *container.HostConfig) { h.CapAdd = []string{"SYS_ADMIN"} }, []string{"CapAdd"}},
		{"privileged", func(_ *container.Config, h *container.HostConfig) { h.Privileged = true }, []string{"Privileged"}},
		{"readonly paths", func(_ *container.Config, h *container.HostConfig) { h.ReadonlyPaths = h.ReadonlyPaths[:5] }, []string{"ReadonlyPaths"}},
		{"pids", func(_ *container.Config, h *container.HostConfig) { n := int64(-1); h.PidsLimit = &n }, []string{"PidsLimit"}},
		{"memory", func(_ *container.Config, h *container.HostConfig) { h.Memory = 0 }, []string{"Memory"}},
		{"log driver", func(_ *container.Config, h *container.HostConfig) { h.LogConfig.Type = "json-file" }, []string{"LogConfig.Type"}},
		{"tmpfs", func(_ *container.Config, h *container.HostConfig) { h.Tmpfs["/tmp"] = "rw,exec" }, []string{"Tmpfs[/tmp]"}},
		{"init", func(_ *container.Config, h *container.HostConfig) { v := true; h.Init = &v }, []string{"Init"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gc, gh := want()
			tt.change(gc, gh)
			got := slices.Concat(specDiff(wc, gc), specDiff(wh, gh))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("specDiff (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSpecLive: a container created from docker.ContainerSpec reads back from the
// engine with no difference, and the `docker run` baseline's flags run a program.
// Docker only: Podman ignores ReadonlyPaths and takes the seccomp option as a path.
func TestSpecLive(t *testing.T) {
	cli, err := engine.NewClient("")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	info, err := engine.Identify(t.Context(), cli)
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no engine: %v", err)
		}
		t.Fatal(err)
	}
	if info.IsPodman() {
		t.Skipf("engine is %s: the spec's read-back is checked against Docker", info)
	}
	image := cmpOr(os.Getenv("MCP_EXEC_IMAGE"), launcher.DefaultImage)
	profile, err := docker.SeccompProfile()
	if err != nil {
		t.Fatal(err)
	}
	wc, wh := hardenedSpec(image, profile, []string{"true"})
	created, err := cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{Config: wc, HostConfig: wh})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
	got, err := cli.ContainerInspect(t.Context(), created.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := slices.Concat(specDiff(wc, got.Container.Config), specDiff(wh, got.Container.HostConfig)); len(d) != 0 {
		t.Errorf("the engine reports the container differently from its spec in %q", d)
	}

	dockerCLI, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker CLI")
	}
	file, err := writeProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(file)
	args, _ := dockerRunArgs(image, file)
	cmd := exec.CommandContext(t.Context(), dockerCLI, args...)
	cmd.Stdin = strings.NewReader("import os; print(os.getuid(), os.getcwd())")
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "65532 /tmp\n" {
		t.Errorf("docker %s: got %q, %v; want \"65532 /tmp\\n\"", strings.Join(args, " "), out, err)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
