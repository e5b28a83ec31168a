#!/bin/sh
# docker/compose.yaml as Compose reads it (Debian's docker-compose; no
# daemon needed): both profiles are valid; the CPU profile asks for no
# NVIDIA device; no service publishes a fixed host port (so it can be
# scaled); every service has a memory limit twice its --memory-budget and
# a named volume (shared by its replicas) for the state directory.
# Skips (77) without docker-compose.
#   compose_config.sh SOURCE_DIR
set -eu
src=$1
command -v docker-compose >/dev/null || { echo "skipped: docker-compose is not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for profile in cpu gpu; do
  docker-compose -f "$src/docker/compose.yaml" --profile "$profile" config >"$tmp/$profile.yaml"
done
/usr/bin/python3 - "$tmp/cpu.yaml" "$tmp/gpu.yaml" <<'EOC'
import re, sys, yaml
problems = []
units = {"k": 2**10, "m": 2**20, "g": 2**30}
for path in sys.argv[1:]:
    profile = "cpu" if path.endswith("cpu.yaml") else "gpu"
    services = yaml.safe_load(open(path))["services"]
    for name, s in services.items():
        active = profile in s.get("profiles", [])
        for p in s.get("ports", []):
            text = p if isinstance(p, str) else f"{p.get('host_ip', '')}:{p.get('published', '')}:{p.get('target')}"
            if not re.fullmatch(r"127\.0\.0\.1::\d+(/tcp)?", text):
                problems.append(f"{name}: port {text} is not loopback with an engine-picked host port")
        limit = str(s.get("mem_limit", ""))
        m = re.fullmatch(r"(\d+)([kmg])", limit.lower())
        cmd = s.get("command", [])
        if not m or "--memory-budget" not in cmd:
            problems.append(f"{name}: needs mem_limit and --memory-budget")
        elif int(cmd[cmd.index("--memory-budget") + 1]) * 2**20 * 2 != int(m.group(1)) * units[m.group(2)]:
            problems.append(f"{name}: mem_limit {limit} is not twice --memory-budget")
        vols = [v if isinstance(v, str) else f"{v.get('source')}:{v.get('target')}"
                for v in s.get("volumes", [])]
        if not any(v.split(":")[1] == "/var/lib/mrrecon" and not v.startswith("/") for v in vols):
            problems.append(f"{name}: no named volume for the state directory /var/lib/mrrecon")
        gpu = "nvidia" in str(s.get("deploy", ""))
        if active and profile == "cpu" and gpu:
            problems.append(f"{name}: the cpu profile reserves an NVIDIA device")
        if active and profile == "gpu" and not gpu:
            problems.append(f"{name}: the gpu profile reserves no GPU")
for p in problems:
    print("error:", p, file=sys.stderr)
print("compose.yaml:", "ok" if not problems else "FAILED")
sys.exit(1 if problems else 0)
EOC
