#!/bin/sh
# deploy/k8s rendered (kubectl kustomize) and validated offline against the
# Kubernetes schema (k8s_validate.py, Debian's python3-kubernetes), then
# held to what docs/deploy.md promises: GPU base with nvidia.com/gpu, a CPU
# overlay without, numeric non-root user, readiness and liveness probes on
# the --http port, a grace period above the drain timeout, a Service, a
# PodDisruptionBudget, the Prometheus scrape annotations and the state
# directory on a claim the replicas share.
# Skips (77) without kubectl or python3-kubernetes.
#   k8s_manifests.sh SOURCE_DIR
set -eu
src=$1
py=/usr/bin/python3
command -v kubectl >/dev/null || { echo "skipped: no kubectl (Debian: kubernetes-client)"; exit 77; }
"$py" -c "import kubernetes, yaml" 2>/dev/null ||
  { echo "skipped: no python3-kubernetes / python3-yaml"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for variant in base overlays/cpu; do
  out="$tmp/$(echo "$variant" | tr / _).yaml"
  kubectl kustomize "$src/deploy/k8s/$variant" >"$out" 2>"$tmp/kustomize.err" ||
    { cat "$tmp/kustomize.err"; exit 1; }
  echo "== $variant"
  "$py" "$src/tests/deploy/k8s_validate.py" <"$out"
  "$py" - "$variant" "$out" <<'EOC'
import sys, yaml
variant, path = sys.argv[1], sys.argv[2]
docs = {d["kind"]: d for d in yaml.safe_load_all(open(path)) if d}
problems = []
def need(cond, what):
    if not cond:
        problems.append(what)
need({"Deployment", "Service", "PodDisruptionBudget", "PersistentVolumeClaim"} <= set(docs),
     "Deployment, Service, PDB and the state's claim")
pod = docs["Deployment"]["spec"]["template"]
spec = pod["spec"]
c = spec["containers"][0]
sc = spec.get("securityContext", {})
need(sc.get("runAsNonRoot") is True and isinstance(sc.get("runAsUser"), int) and sc["runAsUser"] > 0,
     "numeric non-root user")
for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
    need(c.get(probe, {}).get("httpGet", {}).get("path") == path, f"{probe} on {path}")
args = c.get("args", [])
drain_ms = int(args[args.index("--drain-timeout") + 1]) if "--drain-timeout" in args else 30000
need(spec.get("terminationGracePeriodSeconds", 30) * 1000 > drain_ms,
     "terminationGracePeriodSeconds above --drain-timeout")
need(pod["metadata"].get("annotations", {}).get("prometheus.io/scrape") == "true",
     "Prometheus scrape annotation")
# --state-dir (the image's entrypoint) on a claim every replica can share
mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
volumes = {v["name"]: v for v in spec.get("volumes", [])}
claim = volumes.get(mounts.get("/var/lib/mrrecon"), {}).get("persistentVolumeClaim", {})
need(claim.get("claimName") == docs.get("PersistentVolumeClaim", {}).get("metadata", {}).get("name"),
     "/var/lib/mrrecon on the state's claim")
need("ReadWriteMany" in docs.get("PersistentVolumeClaim", {}).get("spec", {}).get("accessModes", []),
     "a state claim replicas can share (ReadWriteMany)")
gpus = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
if variant == "base":
    need(gpus is not None and int(gpus) >= 1, "nvidia.com/gpu in the base")
else:
    need(gpus is None and "--gpus" in args and args[args.index("--gpus") + 1] == "none",
         "no GPU and --gpus none in the CPU overlay")
for p in problems:
    print(f"error: {variant}: {p}", file=sys.stderr)
print(f"{variant}: {'ok' if not problems else 'FAILED'}")
sys.exit(1 if problems else 0)
EOC
done
