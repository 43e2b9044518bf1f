#!/usr/bin/env python3
"""Checks on rendered chart manifests, for chart_test.sh.

Reads the objects as a stream of JSON documents on stdin (chart_test.sh turns `helm template`'s YAML
into that with kubectl, since Python's standard library has no YAML parser) and runs one check,
named by the first argument. A check prints what it found wrong, one line each, and exits 1; or
prints what was asked for and exits 0.
"""

import json
import os
import sys


def read_objects(text):
    decoder = json.JSONDecoder()
    objects, index = [], 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if index == len(text):
            return objects
        value, index = decoder.raw_decode(text, index)
        objects.extend(value["items"] if value.get("kind") == "List" else [value])


def name_of(obj):
    namespace = obj["metadata"].get("namespace")
    name = obj["metadata"]["name"]
    return f"{obj['kind']} {namespace}/{name}" if namespace else f"{obj['kind']} {name}"


def only(objects, kind):
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects, kind):
    found = only(objects, kind)
    if len(found) != 1:
        sys.exit(f"expected exactly one {kind}, found {len(found)}")
    return found[0]


def roles(objects):
    return [obj for obj in objects if obj["kind"] in ("ClusterRole", "Role")]


def aggregated(role):
    """Whether the role is folded into built-in ones (edit, view) rather than bound to anyone."""
    labels = role["metadata"].get("labels") or {}
    return any(key.startswith("rbac.authorization.k8s.io/aggregate-to-") for key in labels)


def for_readers(role):
    """Whether the role grants only non-resource URLs (/metrics): it is for scrapers to be bound
    to, not for the operator."""
    rules = role.get("rules") or []
    return bool(rules) and all(rule.get("nonResourceURLs") for rule in rules)


def operator_roles(objects):
    return [role for role in roles(objects) if not aggregated(role) and not for_readers(role)]


def reader_roles(objects, _args):
    """Each role for scrapers as `name-suffix URL verb,...` and the subjects bound to it (none)."""
    for role in roles(objects):
        if not for_readers(role):
            continue
        suffix = role["metadata"]["name"].rsplit("-", 2)
        bindings = [b for b in only(objects, role["kind"] + "Binding")
                    if b["roleRef"]["name"] == role["metadata"]["name"]]
        for rule in role["rules"]:
            for url in rule["nonResourceURLs"]:
                print("-".join(suffix[1:]), url, ",".join(sorted(rule["verbs"])),
                      f"bound={len(bindings)}")
    return True


def objects_list(objects, _args):
    """Every object as `Kind namespace/name`."""
    for obj in objects:
        print(name_of(obj))
    return True


def wildcards(objects, _args):
    """No RBAC rule may grant `*` in any of its lists: least privilege, spelled out."""
    good = True
    for role in roles(objects):
        for rule in role.get("rules") or []:
            for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                if any("*" in value for value in rule.get(key) or []):
                    print(f"{name_of(role)}: {key} holds a wildcard: {json.dumps(rule)}")
                    good = False
    return good


def grants(objects, _args):
    """Every grant to the operator as `scope group resource verb,...`: scope is `cluster` for a
    ClusterRole and the namespace for a Role; group `core` for the core API group."""
    merged = {}
    for role in operator_roles(objects):
        scope = ("cluster" if role["kind"] == "ClusterRole"
                 else role["metadata"].get("namespace", "(no namespace)"))
        for rule in role.get("rules") or []:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    key = (scope, group or "core", resource)
                    merged.setdefault(key, set()).update(rule.get("verbs") or [])
    for (scope, group, resource), verbs in sorted(merged.items()):
        print(scope, group, resource, ",".join(sorted(verbs)))
    return True


def bound(objects, _args):
    """Every Role and ClusterRole but the aggregated ones and those for scrapers is bound to the
    chart's ServiceAccount, in its namespace."""
    account = one(objects, "ServiceAccount")
    subject = {"kind": "ServiceAccount", "name": account["metadata"]["name"],
               "namespace": account["metadata"]["namespace"]}
    good = True
    for role in operator_roles(objects):
        binding_kind = role["kind"] + "Binding"
        namespace = role["metadata"].get("namespace")
        matches = [binding for binding in only(objects, binding_kind)
                   if binding["metadata"].get("namespace") == namespace
                   and binding["roleRef"]["kind"] == role["kind"]
                   and binding["roleRef"]["name"] == role["metadata"]["name"]
                   and subject in binding.get("subjects", [])]
        if not matches:
            print(f"{name_of(role)} is not bound to {subject}")
            good = False
    return good


def aggregation(objects, _args):
    """Each aggregated ClusterRole as `name-suffix aggregate-to-targets resource verb,...`, the
    chart's full name left out of the name."""
    for role in roles(objects):
        if not aggregated(role):
            continue
        targets = sorted(key.rsplit("aggregate-to-", 1)[1]
                         for key in role["metadata"]["labels"] if "aggregate-to-" in key)
        suffix = role["metadata"]["name"].rsplit("-", 1)[1]
        for rule in role.get("rules") or []:
            for resource in rule.get("resources") or []:
                print(suffix, ",".join(targets), resource, ",".join(sorted(rule["verbs"])))
    return True


def deployment(objects, args):
    """The operator's Deployment: replicas, hardening, probes, the downward-API namespace, and the
    arguments given (pairs of flag and value, or a flag alone, after `--`)."""
    deploy = one(objects, "Deployment")
    spec = deploy["spec"]
    pod = spec["template"]["spec"]
    containers = pod["containers"]
    if len(containers) != 1:
        print(f"expected one container, found {len(containers)}")
        return False
    container = containers[0]
    problems = []

    def expect(what, actual, wanted):
        if actual != wanted:
            problems.append(f"{what} is {json.dumps(actual)}, expected {json.dumps(wanted)}")

    replicas = int(args[0])
    expect("spec.replicas", spec.get("replicas"), replicas)
    labels = spec["template"]["metadata"].get("labels", {})
    for key, value in spec["selector"]["matchLabels"].items():
        expect(f"pod label {key}", labels.get(key), value)
    security = container.get("securityContext", {})
    expect("securityContext.runAsNonRoot", security.get("runAsNonRoot"), True)
    expect("securityContext.runAsUser", security.get("runAsUser"), 65532)
    expect("securityContext.readOnlyRootFilesystem", security.get("readOnlyRootFilesystem"), True)
    expect("securityContext.allowPrivilegeEscalation",
           security.get("allowPrivilegeEscalation"), False)
    expect("securityContext.capabilities.drop", security.get("capabilities", {}).get("drop"),
           ["ALL"])
    expect("securityContext.seccompProfile.type",
           security.get("seccompProfile", {}).get("type"), "RuntimeDefault")
    ports = {port["name"]: port["containerPort"] for port in container.get("ports", [])}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container.get(probe, {}).get("httpGet", {})
        expect(f"{probe}.httpGet.path", get.get("path"), path)
        port = ports.get(get.get("port"), get.get("port"))
        expect(f"{probe}.httpGet.port", port, 8081)
    expect("the metrics containerPort", ports.get("metrics"), 8080)
    env = {item["name"]: item for item in container.get("env", [])}
    expect("env POD_NAMESPACE",
           env.get("POD_NAMESPACE", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath"),
           "metadata.namespace")
    if not container.get("resources", {}).get("requests") or \
            not container.get("resources", {}).get("limits"):
        problems.append("the container has no resource requests or limits")

    wanted = args[args.index("--") + 1:] if "--" in args else []
    actual = container.get("args", [])
    index = 0
    while index < len(wanted):
        flag = wanted[index]
        has_value = index + 1 < len(wanted) and not wanted[index + 1].startswith("--")
        if flag not in actual:
            problems.append(f"args lack {flag}: {actual}")
        elif has_value:
            position = actual.index(flag)
            value = actual[position + 1] if position + 1 < len(actual) else None
            expect(f"the value of {flag}", value, wanted[index + 1])
        index += 2 if has_value else 1
    for line in problems:
        print(f"{name_of(deploy)}: {line}")
    return not problems


def absent_flag(objects, args):
    """The Deployment's container does not pass this flag."""
    container = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    if args[0] in container.get("args", []):
        print(f"args hold {args[0]}: {container['args']}")
        return False
    return True


def service(objects, _args):
    """The metrics Service selects the operator's Pods and targets their metrics port; a
    ServiceMonitor, when there is one, selects that Service and names its port."""
    svc = one(objects, "Service")
    pod_labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    problems = []
    for key, value in svc["spec"]["selector"].items():
        if pod_labels.get(key) != value:
            problems.append(f"selector {key}={value} matches no label of the operator's Pods")
    port_names = [port.get("name") for port in svc["spec"]["ports"]]
    if [port.get("targetPort") for port in svc["spec"]["ports"]] != ["metrics"]:
        problems.append(f"ports {svc['spec']['ports']} do not target the container port metrics")
    for monitor in only(objects, "ServiceMonitor"):
        selector = monitor["spec"]["selector"]["matchLabels"]
        for key, value in selector.items():
            if svc["metadata"]["labels"].get(key) != value:
                problems.append(f"{name_of(monitor)} selects {key}={value}, not on the Service")
        for endpoint in monitor["spec"]["endpoints"]:
            if endpoint.get("port") not in port_names:
                problems.append(f"{name_of(monitor)} scrapes port {endpoint.get('port')}, "
                                f"not one of the Service's {port_names}")
            if endpoint.get("path") != "/metrics":
                problems.append(f"{name_of(monitor)} scrapes path {endpoint.get('path')}")
        namespaces = monitor["spec"].get("namespaceSelector", {}).get("matchNames", [])
        if svc["metadata"]["namespace"] not in namespaces:
            problems.append(f"{name_of(monitor)} does not look in {svc['metadata']['namespace']}")
    for line in problems:
        print(f"{name_of(svc)}: {line}")
    return not problems


def labels(objects, args):
    """The labels of the one object of kind args[0], as key=value lines."""
    for key, value in sorted(one(objects, args[0])["metadata"].get("labels", {}).items()):
        print(f"{key}={value}")
    return True


def scrape_endpoint(objects, _args):
    """The ServiceMonitor's endpoint: its honorLabels, then its metricRelabelings as JSON, then how
    it reaches /metrics (scheme, TLS, token)."""
    endpoint = one(objects, "ServiceMonitor")["spec"]["endpoints"][0]
    print(f"honorLabels={json.dumps(endpoint.get('honorLabels'))}")
    print(f"metricRelabelings={json.dumps(endpoint.get('metricRelabelings'), sort_keys=True)}")
    print(f"scheme={endpoint.get('scheme')} tlsConfig={json.dumps(endpoint.get('tlsConfig'))}",
          f"bearerTokenFile={endpoint.get('bearerTokenFile')}")
    return True


def dashboard_data(objects, _args):
    """The dashboard JSON that the dashboard ConfigMap carries."""
    maps = [obj for obj in only(objects, "ConfigMap") if obj["metadata"]["name"].endswith(
        "-dashboard")]
    if len(maps) != 1:
        print(f"expected one dashboard ConfigMap, found {len(maps)}")
        return False
    data = maps[0].get("data", {})
    if len(data) != 1:
        print(f"{name_of(maps[0])} holds {sorted(data)}, expected one JSON file")
        return False
    sys.stdout.write(next(iter(data.values())))
    return True


CHECKS = {
    "objects": objects_list,
    "wildcards": wildcards,
    "grants": grants,
    "bound": bound,
    "aggregation": aggregation,
    "reader-roles": reader_roles,
    "deployment": deployment,
    "absent-flag": absent_flag,
    "service": service,
    "labels": labels,
    "scrape-endpoint": scrape_endpoint,
    "dashboard-data": dashboard_data,
}

def run(commands):
    """Runs the command the first argument names on the objects of stdin; exits 0 when it holds."""
    program = os.path.basename(sys.argv[0])
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(f"usage: {program} {{{','.join(commands)}}} [ARGS...] < objects.json")
    try:
        good = commands[sys.argv[1]](read_objects(sys.stdin.read()), sys.argv[2:])
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
        # A render malformed enough to miss what a command reads is a failure, said in one line.
        sys.exit(f"{program} {sys.argv[1]}: malformed objects: {type(error).__name__} {error}")
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    run(CHECKS)
