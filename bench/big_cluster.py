#!/usr/bin/env python3
"""Objects shaped like a big shared GPU cluster's, written to a local control plane, and the
timings bench/big_cluster.sh needs. Standard library only: it talks to the API server over HTTPS
with the kubeconfig's client certificate (scripts/controlplane's admin).

  big_cluster.py nodes N                    N GPU Nodes of ~16 KB (NFD labels, 50 images),
                                            tainted for other teams
  big_cluster.py workloads N NAMESPACES     N Kueue Workloads of other teams, with a Pod template
  big_cluster.py configmaps N NAMESPACES    N ConfigMaps of other teams, ~3 KB each
  big_cluster.py measurements N NAMESPACES SOURCE_NS SOURCE_NAME KEY_NS KEY_SECRET
                                            N ConfigMaps, each a copy of one measurement of a
                                            ConfigMap the operator kept, under a name of its own
                                            and sealed with its key
  big_cluster.py touch-nodes N SECONDS      every Node's heartbeat written once, spread over SECONDS
  big_cluster.py first-pod NAMESPACE FILE   creates the AutotuneJob of FILE (JSON) and prints the
                                            seconds until its first trial Pod exists

Every count prints what was written; any refusal other than 409 (already there) fails the run.
"""

import base64
import concurrent.futures
import hashlib
import hmac
import http.client
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse

THREADS = 8


class Api:
    """One HTTPS connection per thread to the kubeconfig's server."""

    def __init__(self, kubeconfig):
        config = read_kubeconfig(kubeconfig)
        url = urllib.parse.urlparse(config["server"])
        self.host, self.port = url.hostname, url.port
        self.context = ssl.create_default_context(cafile=config["ca"])
        self.context.load_cert_chain(config["cert"], config["key"])
        self.local = threading.local()

    def connection(self):
        if getattr(self.local, "connection", None) is None:
            self.local.connection = http.client.HTTPSConnection(
                self.host, self.port, context=self.context, timeout=60)
        return self.local.connection

    def request(self, method, path, body=None, content_type="application/json"):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if data is not None else {}
        for attempt in range(3):
            try:
                connection = self.connection()
                connection.request(method, path, body=data, headers=headers)
                response = connection.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, OSError):
                self.local.connection = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def create(self, path, body):
        status, text = self.request("POST", path, body)
        if status not in (200, 201, 409):
            raise SystemExit(f"POST {path}: {status} {text[:300]!r}")
        return status != 409


def read_kubeconfig(path):
    """The server, CA and client certificate files of scripts/controlplane's kubeconfig."""
    fields = {}
    with open(path, encoding="utf-8") as file:
        for line in file:
            key, _, value = line.strip().partition(": ")
            if key in ("server", "certificate-authority", "client-certificate", "client-key"):
                fields[key] = value.strip()
    return {"server": fields["server"], "ca": fields["certificate-authority"],
            "cert": fields["client-certificate"], "key": fields["client-key"]}


def create_all(api, items):
    """(path, body) pairs, created by THREADS threads; returns how many were new."""
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        return sum(pool.map(lambda item: api.create(*item), items))


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def node(index):
    name = f"gpu-big-{index:05d}"
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": f"us-east-1{'abcdef'[index % 6]}",
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper", "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/cuda.runtime.major": "12", "nvidia.com/mig.capable": "true",
    }
    for feature in range(60):
        labels[f"feature.node.kubernetes.io/cpu-cpuid.FEATURE{feature:02d}"] = "true"
    images = [{"names": [f"registry.example.com/team-{image % 9}/image-{image}@sha256:"
                         + hashlib.sha256(f"{index}-{image}".encode()).hexdigest(),
                         f"registry.example.com/team-{image % 9}/image-{image}:v1.{image}.0"],
               "sizeBytes": 1_000_000_000 + image * 7919} for image in range(50)]
    condition = lambda kind, status, reason: {  # noqa: E731
        "type": kind, "status": status, "reason": reason, "message": f"kubelet says {reason}",
        "lastHeartbeatTime": now(), "lastTransitionTime": now()}
    resources = {"cpu": "192", "memory": "2063731900Ki", "nvidia.com/gpu": "8", "pods": "110",
                 "ephemeral-storage": "3771998404Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {
            "nfd.node.kubernetes.io/feature-labels": ",".join(sorted(labels)),
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        # Another team's nodes: nothing of ours is scheduled there, whatever their GPUs.
        "spec": {"providerID": f"aws:///us-east-1a/i-{index:017x}",
                 "podCIDR": f"10.{index // 256}.{index % 256}.0/24",
                 "taints": [{"key": "dedicated", "value": f"team-{index % 10}",
                             "effect": "NoSchedule"}]},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                           condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                           condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                           condition("Ready", "True", "KubeletReady")],
            "addresses": [{"type": "InternalIP", "address": f"10.{index // 256}.{index % 256}.1"},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": f"{index:032x}", "systemUUID": f"{index:032x}",
                         "bootID": f"{index:032x}", "kernelVersion": "6.1.0-28-cloud-amd64",
                         "osImage": "Amazon Linux 2023", "containerRuntimeVersion":
                         "containerd://1.7.22", "kubeletVersion": "v1.37.2",
                         "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64"},
            "images": images}}


def workload(index, namespace):
    env = [{"name": f"SETTING_{item}", "value": f"value-{item}-{index}"} for item in range(10)]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"job-train-{index:06d}", "namespace": namespace,
                     "labels": {"kueue.x-k8s.io/job-uid": f"{index:032x}", "team": namespace}},
        "spec": {"queueName": "team-queue", "podSets": [{
            "name": "main", "count": 4,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "train", "image": f"registry.example.com/{namespace}/train:v{index % 40}",
                "command": ["torchrun", "--nproc-per-node", "8", "train.py"],
                "args": ["--config", "/etc/train/config.yaml", "--run", f"run-{index}"],
                "env": env,
                "resources": {"requests": {"cpu": "90", "memory": "900Gi", "nvidia.com/gpu": "8"},
                              "limits": {"nvidia.com/gpu": "8"}}}]}}}]}}


def config_map(index, namespace):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"settings-{index:06d}", "namespace": namespace,
                         "labels": {"app": f"service-{index % 50}"}},
            "data": {"config.yaml": "\n".join(f"key{line}: value-{line}-{index}"
                                              for line in range(120))}}


def spread(count, namespaces):
    return [(index, namespaces[index % len(namespaces)]) for index in range(count)]


def ensure_namespaces(api, namespaces):
    create_all(api, [("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": ns}}) for ns in namespaces])


def get(api, path):
    status, text = api.request("GET", path)
    if status != 200:
        raise SystemExit(f"GET {path}: {status} {text[:300]!r}")
    return json.loads(text)


def seal_of(config_map_object, key):
    """The operator's seal (src/controller/objects/measurement_identity.cpp, sealedText): HMAC-SHA256 over the
    JSON array of namespace, name, three annotations and data, as nlohmann dumps it."""
    metadata = config_map_object["metadata"]
    annotations = metadata.get("annotations", {})
    text = json.dumps([metadata["namespace"], metadata["name"],
                       annotations.get("autotune.io/measured-by", ""),
                       annotations.get("autotune.io/measured-by-uid", ""),
                       annotations.get("autotune.io/trial-name", ""),
                       config_map_object.get("data", {})],
                      separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return hmac.new(key.encode(), text.encode(), hashlib.sha256).hexdigest()


def measurements(api, count, namespaces, source, key_secret):
    original = get(api, f"/api/v1/namespaces/{source[0]}/configmaps/{source[1]}")
    key = get(api, f"/api/v1/namespaces/{key_secret[0]}/secrets/{key_secret[1]}")["data"]["key"]
    if original["metadata"]["annotations"].get("autotune.io/seal") != seal_of(original, key):
        raise SystemExit("this script's seal does not match the operator's: fix seal_of")
    # One measurement of the original's each (it may hold a reconcile's several): N measurements.
    identity = sorted(original["data"])[0].rsplit(".", 2)[0]
    data = {key: value for key, value in original["data"].items()
            if key.rsplit(".", 2)[0] == identity}
    items = []
    for index, namespace in spread(count, namespaces):
        copy = {"apiVersion": "v1", "kind": "ConfigMap", "data": data,
                "metadata": {"name": f"{original['metadata']['name'][:40]}-{index:06d}",
                             "namespace": namespace, "labels": original["metadata"]["labels"],
                             "annotations": dict(original["metadata"]["annotations"])}}
        copy["metadata"]["annotations"]["autotune.io/seal"] = seal_of(copy, key)
        items.append((f"/api/v1/namespaces/{namespace}/configmaps", copy))
    return create_all(api, items)


def touch_nodes(api, count, seconds):
    """A status write to each Node, as kubelets report, spread evenly over `seconds`."""
    started = time.monotonic()
    patch = lambda: {"status": {"conditions": [{"type": "Ready", "status": "True",  # noqa: E731
                                                "reason": "KubeletReady",
                                                "message": "kubelet is posting ready status",
                                                "lastHeartbeatTime": now()}]}}

    def touch(index):
        delay = started + seconds * index / count - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        status, text = api.request("PATCH", f"/api/v1/nodes/gpu-big-{index:05d}/status", patch(),
                                   "application/strategic-merge-patch+json")
        if status != 200:
            raise SystemExit(f"PATCH node {index}: {status} {text[:300]!r}")

    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(touch, range(count)))
    return count


def first_pod(api, namespace, job_file):
    """Seconds from the job's create to its first trial Pod's ADDED event, over one watch."""
    with open(job_file, encoding="utf-8") as file:
        job = json.load(file)
    name = job["metadata"]["name"]
    selector = urllib.parse.quote(f"autotune.io/job={name}")
    listed = get(api, f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}")
    version = listed["metadata"]["resourceVersion"]
    watcher = http.client.HTTPSConnection(api.host, api.port, context=api.context, timeout=120)
    watcher.request("GET", f"/api/v1/namespaces/{namespace}/pods?watch=1&labelSelector="
                    f"{selector}&resourceVersion={version}")
    stream = watcher.getresponse()
    started = time.monotonic()
    api.create(f"/apis/autotune.io/v1alpha1/namespaces/{namespace}/autotunejobs", job)
    while True:
        line = stream.readline()
        if not line:
            raise SystemExit("the watch of the job's Pods ended before any Pod came")
        if json.loads(line).get("type") == "ADDED":
            return time.monotonic() - started


def main(argv):
    api = Api(os.environ["KUBECONFIG"])
    command, args = argv[1], argv[2:]
    if command == "nodes":
        made = create_all(api, [("/api/v1/nodes", node(index)) for index in range(int(args[0]))])
    elif command in ("workloads", "configmaps", "measurements"):
        namespaces = args[1].split(",")
        ensure_namespaces(api, namespaces)
        if command == "workloads":
            made = create_all(api, [(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads",
                                     workload(index, ns))
                                    for index, ns in spread(int(args[0]), namespaces)])
        elif command == "configmaps":
            made = create_all(api, [(f"/api/v1/namespaces/{ns}/configmaps", config_map(index, ns))
                                    for index, ns in spread(int(args[0]), namespaces)])
        else:
            made = measurements(api, int(args[0]), namespaces, (args[2], args[3]),
                                (args[4], args[5]))
    elif command == "touch-nodes":
        made = touch_nodes(api, int(args[0]), float(args[1]))
    elif command == "first-pod":
        print(f"{first_pod(api, args[0], args[1]):.3f}")
        return
    else:
        raise SystemExit(__doc__)
    print(made)


if __name__ == "__main__":
    main(sys.argv)
