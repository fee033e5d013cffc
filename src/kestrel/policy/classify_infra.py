"""The classifier's checks of infrastructure tools: kubectl, helm, terraform and OpenTofu,
pulumi. Read-only look-alikes (`kubectl get`, `terraform plan`, `helm list`) are left alone."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from kestrel.policy.classify_scan import Scan, split
from kestrel.policy.shell import SimpleCommand

_KUBE_VALUE = frozenset({"-n", "--namespace", "--context", "--kubeconfig", "--cluster", "--user"})
_KUBE_VALUE |= {"-s", "--server", "-l", "--selector", "-o", "--output", "-f", "--filename", "-c"}
_KUBE_VALUE |= {"--field-selector", "--token", "--as", "--replicas", "--timeout", "-k"}
_KUBE_VERBS = frozenset(
    {"get", "describe", "logs", "delete", "apply", "create", "edit", "patch", "replace", "scale"}
    | {"drain", "cordon", "uncordon", "taint", "rollout", "exec", "run", "expose", "label"}
    | {"annotate", "top", "explain", "port-forward", "proxy", "cp", "auth", "config", "diff"}
    | {"wait", "events", "set", "autoscale", "attach", "debug", "api-resources", "version"}
    | {"cluster-info", "certificate", "kustomize", "plugin", "api-versions", "completion"}
)


def verb(operands: Sequence[str], known: frozenset[str]) -> tuple[str, list[str]]:
    """The first operand that is one of the tool's subcommands, and the operands after it."""
    for i, word in enumerate(operands):
        if word in known:
            return word, list(operands[i + 1 :])
    return "", []


def hidden_verb(command: SimpleCommand, operands: Sequence[str]) -> list[str]:
    """A subcommand only known at run time (`kubectl $VERB ns x`) may be the destructive one."""
    if any("$" in o or "`" in o for o in operands[:3]):
        return [f"it runs {command.name} with a subcommand only known when it runs"]
    return []


def _dry_run(flags: Sequence[str]) -> bool:
    return any(
        f == "--dry-run" or (f.startswith("--dry-run=") and f != "--dry-run=none") for f in flags
    )


def _kubectl(command: SimpleCommand, scan: Scan) -> list[str]:
    flags, operands = split(command.words[1:], _KUBE_VALUE)
    sub, rest = verb(operands, _KUBE_VERBS)
    if _dry_run(flags) or "--help" in flags or "-h" in flags:
        return []
    if not sub:
        return hidden_verb(command, operands)
    what = " ".join(rest[:2]) or "resources"
    tool = command.name if command.name in ("kubectl", "oc") else f"{command.name} kubectl"
    if sub == "delete":
        return [f"it deletes Kubernetes {what} from the cluster ({tool} delete)"]
    if sub == "drain":
        return [f"it evicts every pod from the node {what} ({tool} drain)"]
    if sub == "cordon":
        return [f"it stops the cluster from scheduling pods on {what} ({tool} cordon)"]
    if sub == "patch" and _ZERO_REPLICAS.search(" ".join(command.words)):
        return [f"it patches {what} down to zero replicas, stopping it ({tool} patch)"]
    if sub == "scale" and _replicas(command.words) == "0":
        return [f"it scales {what} down to zero replicas, stopping it ({tool} scale)"]
    if sub == "apply" and any(f == "--prune" or f.startswith("--prune=") for f in flags):
        return [f"it deletes cluster resources missing from the files ({tool} apply --prune)"]
    forced = "--force" in flags or "--force=true" in flags
    if sub in ("replace", "apply") and forced:
        return [f"it deletes and recreates Kubernetes resources ({tool} {sub} --force)"]
    if sub == "config" and rest[:1] and (rest[0].startswith("delete-") or rest[0] == "unset"):
        return [f"it removes entries of the saved cluster credentials ({tool} config {rest[0]})"]
    if sub == "rollout" and rest[:1] == ["undo"]:
        return [f"it rolls a live workload back to an earlier revision ({tool} rollout undo)"]
    return []


_ZERO_REPLICAS = re.compile(r"[\"']?replicas[\"']?\s*:\s*0\b")


def _replicas(words: Sequence[str]) -> str:
    for i, word in enumerate(words):
        if word.startswith("--replicas="):
            return word.partition("=")[2]
        if word == "--replicas" and i + 1 < len(words):
            return words[i + 1]
    return ""


_HELM_VALUE = frozenset({"-n", "--namespace", "--kube-context", "--kubeconfig", "-f", "--values"})
_HELM_VERBS = frozenset(
    {"uninstall", "delete", "del", "un", "rollback", "install", "upgrade", "list", "ls", "status"}
    | {"template", "get", "history", "hist", "show", "inspect", "repo", "search", "lint"}
    | {"package", "pull", "fetch", "dependency", "dep", "test", "version", "env", "plugin"}
    | {"registry", "create", "verify", "completion", "push"}
)


def _helm(command: SimpleCommand, scan: Scan) -> list[str]:
    flags, operands = split(command.words[1:], _HELM_VALUE)
    sub, rest = verb(operands, _HELM_VERBS)
    if not sub:
        return hidden_verb(command, operands)
    if "--dry-run" in flags or any(f.startswith("--dry-run=") for f in flags):
        return []
    release = rest[0] if rest else "a release"
    if sub in ("uninstall", "delete", "del", "un"):
        return [f"it uninstalls the Helm release {release} and deletes its resources"]
    if sub == "rollback":
        return [f"it rolls the live Helm release {release} back to an earlier revision"]
    return []


_TF_VERBS = frozenset(
    {"init", "validate", "plan", "apply", "destroy", "console", "fmt", "force-unlock", "get"}
    | {"graph", "import", "login", "logout", "metadata", "output", "providers", "refresh"}
    | {"show", "state", "taint", "untaint", "test", "version", "workspace", "run-all", "run"}
)
_TF_VALUE = frozenset({"-var", "-var-file", "-target", "-replace", "-state", "-lock-timeout"})


def _terraform(command: SimpleCommand, scan: Scan) -> list[str]:
    tool = command.name
    flags, operands = split(command.words[1:], _TF_VALUE | {"--" + v[1:] for v in _TF_VALUE})
    sub, rest = verb(operands, _TF_VERBS)
    if sub in ("run-all", "run"):  # terragrunt run-all destroy
        sub, rest = verb(rest, _TF_VERBS)
    if not sub:
        return hidden_verb(command, operands)
    names = {f.lstrip("-").partition("=")[0]: f.partition("=")[2] for f in flags}
    for assignment in command.assignments:  # TF_CLI_ARGS_apply=-auto-approve
        if assignment.startswith("TF_CLI_ARGS"):
            value = assignment.partition("=")[2].strip("'\"")
            names |= {w.lstrip("-").partition("=")[0]: w.partition("=")[2] for w in value.split()}
    if sub == "apply" and (scan.fed(command) or any("<" in r.op for r in command.redirects)):
        return [f"it changes real infrastructure with the confirmation fed from its input ({tool} "
                "apply)"]  # fmt: skip
    if sub == "destroy" and "help" not in names:
        return [f"it destroys the infrastructure this configuration manages ({tool} destroy)"]
    if sub == "apply" and "destroy" in names:
        return [
            f"it destroys the infrastructure this configuration manages ({tool} apply -destroy)"
        ]
    if sub == "apply" and "auto-approve" in names and names["auto-approve"] != "false":
        return [f"it changes real infrastructure without showing the plan ({tool} apply "
                "-auto-approve)"]  # fmt: skip
    if sub == "apply" and rest:
        return [f"it applies the saved plan {rest[0]} to real infrastructure without asking"]
    sub2 = rest[0] if rest else ""
    if sub == "state" and sub2 in ("rm", "push", "replace-provider"):
        return [f"it rewrites the Terraform state ({tool} state {sub2}), so resources can be "
                "orphaned or destroyed"]  # fmt: skip
    if sub == "workspace" and sub2 == "delete":
        return [f"it deletes a Terraform workspace and its state ({tool} workspace delete)"]
    if sub == "force-unlock":
        return [f"it removes another run's state lock ({tool} force-unlock), risking a corrupt "
                "state"]  # fmt: skip
    if sub == "taint":
        return [f"it marks {sub2 or 'a resource'} to be destroyed and recreated on the next apply"]
    return []


_PULUMI_VERBS = frozenset(
    {"destroy", "up", "update", "preview", "stack", "state", "refresh", "cancel", "config"}
    | {"login", "logout", "new", "import", "whoami", "version", "about", "plugin", "logs"}
)


def _pulumi(command: SimpleCommand, scan: Scan) -> list[str]:
    flags, operands = split(command.words[1:], frozenset({"-s", "--stack", "-C", "--cwd"}))
    sub, rest = verb(operands, _PULUMI_VERBS)
    if not sub:
        return hidden_verb(command, operands)
    sub2 = rest[0] if rest else ""
    yes = any(f in ("--yes", "-y", "--skip-preview", "-f") for f in flags)
    if sub == "destroy" and "--preview-only" not in flags:
        return ["it destroys every resource of the Pulumi stack (pulumi destroy)"]
    if sub in ("up", "update") and yes:
        return [f"it changes real infrastructure without showing the preview (pulumi {sub} --yes)"]
    if sub == "stack" and sub2 in ("rm", "remove"):
        return ["it deletes a Pulumi stack and its state (pulumi stack rm)"]
    if sub == "state" and sub2 in ("delete", "unprotect"):
        return [f"it edits the Pulumi state directly (pulumi state {sub2})"]
    if sub == "refresh" and yes:
        return ["it rewrites the Pulumi state from the cloud without a preview (pulumi refresh)"]
    return []


def _local_cluster(command: SimpleCommand, scan: Scan) -> list[str]:
    """`minikube kubectl -- delete ...`, `microk8s kubectl delete ...`, `kind delete cluster`."""
    _, operands = split(command.words[1:], frozenset({"-p", "--profile", "--name"}))
    if operands[:1] == ["kubectl"]:
        return _kubectl(command, scan)
    if "delete" in operands[:2]:
        return [f"it deletes a Kubernetes cluster ({command.name} {' '.join(operands[:2])})"]
    return []


CHECKS: dict[str, Callable[[SimpleCommand, Scan], list[str]]] = {
    **dict.fromkeys(("minikube", "microk8s", "k3s", "kind", "k3d"), _local_cluster),
    "microk8s.kubectl": _kubectl,
    "kubectl": _kubectl,
    "oc": _kubectl,
    "helm": _helm,
    "terraform": _terraform,
    "tofu": _terraform,
    "terragrunt": _terraform,
    "pulumi": _pulumi,
}
