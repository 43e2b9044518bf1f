"""The chart's RBAC against what the operator really asked for.

    rights_used.py RBAC_JSON USER AUDIT_LOG... [--elsewhere GROUP/RESOURCE/VERB...]

RBAC_JSON is the chart's ServiceAccount, Roles, ClusterRoles and bindings as `kubectl get -o json`
lists them; USER the operator's user name; each AUDIT_LOG an API server's audit log (JSON lines):
one per cluster where the operator ran with those rights, read as one run; each GROUP/RESOURCE/VERB
(such as core/pods/get) a grant that these runs do not exercise because another test's run does.
The operator's requests are those of USER whose User-Agent is autotune-operator's (kubectl may use
its credentials too). Prints each (API group, resource, verb) the operator used with its count,
then fails if authorization refused a request, a verb was used that no rule grants, or a granted
verb was never used, apart from those given and the grants listed below with the reason no run can
be made to show them. A 403 that authorization allowed is admission's (a ResourceQuota, Pod
Security), which the e2e cases bring about on purpose; the audit event's
authorization.k8s.io/decision tells them apart.
"""

import argparse
import collections
import json
import sys

OPERATOR_AGENT = "autotune-operator/"

NOT_SEEN_IN_A_RUN = {
    # Checked by the OwnerReferencesPermissionEnforcement admission plugin on a trial Pod's create
    # (its owner reference has blockOwnerDeletion), never requested as such.
    ("autotune.io", "autotunejobs/finalizers", "update"),
    # Writing over the job's own output ConfigMap happens only when the operator stopped between
    # creating it and recording that in the job's status.
    ("core", "configmaps", "patch"),
    # Reading a multi-node trial's Job or Service by name happens only when its create finds the
    # name taken: someone else's object of that name, or the operator's own from a reconcile cut
    # short between the create and the cache hearing of it.
    ("batch", "jobs", "get"),
    ("core", "services", "get"),
    # Deleting kept measurements happens past measurements.perNamespace (1000 by default), which
    # no theme reaches; e2e.reuse runs its operator with a bound of its own and shows it.
    ("core", "configmaps", "delete"),
}


def granted(rbac):
    rights = set()
    for item in rbac.get("items", []):
        if item.get("kind") not in ("Role", "ClusterRole"):
            continue
        for rule in item.get("rules") or []:
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    for verb in rule.get("verbs", []):
                        rights.add((group or "core", resource, verb))
    return rights


def used(audit_lines, user):
    counts, refused = collections.Counter(), collections.Counter()
    for line in audit_lines:
        event = json.loads(line)
        if (event.get("user", {}).get("username") != user or "objectRef" not in event
                or not event.get("userAgent", "").startswith(OPERATOR_AGENT)):
            continue
        ref = event["objectRef"]
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        right = (ref.get("apiGroup") or "core", resource, event["verb"])
        counts[right] += 1
        decision = event.get("annotations", {}).get("authorization.k8s.io/decision")
        if event.get("responseStatus", {}).get("code") == 403 and decision != "allow":
            refused[right] += 1
    return counts, refused


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rbac")
    parser.add_argument("user")
    parser.add_argument("audit_logs", nargs="+")
    parser.add_argument("--elsewhere", nargs="*", default=[])
    return parser.parse_args()


def main():
    args = arguments()
    exercised_elsewhere = {tuple(right.split("/", 2)) for right in args.elsewhere}
    with open(args.rbac, encoding="utf-8") as rbac_file:
        rights = granted(json.load(rbac_file))
    counts, refused = collections.Counter(), collections.Counter()
    for path in args.audit_logs:
        with open(path, encoding="utf-8") as audit_file:
            used_here, refused_here = used(audit_file, args.user)
        counts.update(used_here)
        refused.update(refused_here)
    if not counts:
        print(f"no request of {args.user} in {' '.join(args.audit_logs)}")
        return 1
    for (group, resource, verb), count in sorted(counts.items()):
        print(f"used {group} {resource} {verb}: {count}")
    problems = [f"refused {' '.join(right)}: {count} requests" for right, count in refused.items()]
    problems += [f"used but not granted: {' '.join(right)}" for right in counts if right not in rights]
    problems += [
        f"granted but never used: {' '.join(right)}"
        for right in sorted(rights - set(counts) - NOT_SEEN_IN_A_RUN - exercised_elsewhere)
    ]
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
