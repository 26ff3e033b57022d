"""The Helm chart (deploy/helm/streamforest): rendered with ``helm template``, linted, validated offline
against the Kubernetes schemas (kubernetes-validate), and checked for what the workers need.

helm comes from ``$HELM``, else ``~/.cache/streamforest/bin/helm`` (built by ``deploy/helm/get-helm.sh``,
which ``make helm``, ``make test`` and ``make test-fast`` run), else ``helm`` on the PATH. Without it
these tests fail, naming the script; a developer without Go may set ``STREAMFOREST_TEST_NO_HELM=1`` to skip them instead (reported in the
summary), which CI (``CI=true``) does not honour.
"""

from __future__ import annotations

import atexit
import copy
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from worker.settings import OUTPUT_KINDS, load_settings, stream_profiles
from worker.tools.evaluate import configs as evaluate_configs

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "streamforest"
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
# the oldest Kubernetes the chart claims (Chart.yaml kubeVersion) and the newest kubernetes-validate knows
KUBE_VERSIONS = ("1.25.0", kubernetes_validate.latest_version())
# custom resources: no schema in kubernetes-validate (KEDA's are checked field by field below)
KEDA_KINDS = {"ScaledObject", "TriggerAuthentication"}
# the Prometheus Operator's, likewise (checked field by field below)
CUSTOM_KINDS = KEDA_KINDS | {"ServiceMonitor"}
# `helm template --api-versions`: a cluster with KEDA installed (the ScaledObject renders only there)
KEDA_API = ("keda.sh/v1alpha1",)

SASL_TLS = {
    "kafka": {
        "bootstrapServers": "b1:9093,b2:9093",
        "securityProtocol": "SASL_SSL",
        "saslMechanism": "SCRAM-SHA-512",
        "auth": {"existingSecret": "kafka-credentials"},
        "tls": {"enabled": True, "secretName": "kafka-tls", "certKey": "tls.crt", "keyKey": "tls.key"},
        "extra": {"session.timeout.ms": "60000", "fetch.wait.max.ms": 50},
    },
}
STATIC = {"worker": {"staticMembership": True}}
NO_AUTOSCALING = {"autoscaling": {"enabled": False}, "replicas": 3}
# every template branch at once: StatefulSet, SASL and TLS Secrets, more partitions, another budget,
# output formats
EVERYTHING = {**SASL_TLS, "worker": {"staticMembership": True, "stateBudgetMB": 2048, "shutdownTimeoutSeconds": 45.5},
              "topics": {"partitions": 12}, "env": {"STREAMFOREST_LEARNERS__BATCH_SIZE": 50},
              "output": {"format": "json"}}
CASES = {"defaults": {}, "sasl-tls": SASL_TLS, "static": STATIC, "no-autoscaling": NO_AUTOSCALING,
         "everything": EVERYTHING}


# ------------------------------------------------------------------------------------------------ helm


def _helm_path() -> str | None:
    if os.environ.get("HELM"):
        return os.environ["HELM"]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    cached = cache / "streamforest" / "bin" / "helm"
    if cached.is_file() and os.access(cached, os.X_OK):
        return str(cached)
    return shutil.which("helm")


@pytest.fixture(scope="module")
def helm() -> str:
    path = _helm_path()
    if path is None:
        message = ("helm not found: run deploy/helm/get-helm.sh (make helm, test and test-fast do "
                   "when Go is installed), or set HELM=/path/to/helm")
        opted_out = os.environ.get("STREAMFOREST_TEST_NO_HELM", "") not in ("", "0")
        under_ci = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
        if opted_out and not under_ci:
            pytest.skip(message + " (skipped: STREAMFOREST_TEST_NO_HELM is set)")
        pytest.fail(message)
    return path


@functools.cache
def _helm_env() -> dict[str, str]:
    """helm keeps its own configuration and caches out of the home directory during the tests."""
    home = tempfile.mkdtemp(prefix="streamforest-helm-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return {**os.environ, **{k: os.path.join(home, k) for k in ("HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME")}}


def _run_helm(helm: str, *args: str, values: dict | None = None, apis: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(values or {}, f)
    try:
        api_args = [a for api in apis for a in ("--api-versions", api)]
        return subprocess.run([helm, *args, *api_args, "--values", f.name], capture_output=True, text=True,
                              env=_helm_env(), timeout=120)
    finally:
        os.unlink(f.name)


@functools.cache
def _render_cached(helm: str, values_json: str, apis: tuple[str, ...]) -> tuple[dict, ...]:
    out = _run_helm(helm, "template", "sf", str(CHART), "--namespace", "streams",
                    values=json.loads(values_json), apis=apis)
    assert out.returncode == 0, out.stderr
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


def render(helm: str, values: dict | None = None, apis: tuple[str, ...] = ()) -> list[dict]:
    """The chart's documents for these values (copies: tests may change them), on a cluster serving
    the custom resource APIs ``apis`` (none: a plain cluster)."""
    return copy.deepcopy(list(_render_cached(helm, json.dumps(values or {}, sort_keys=True), tuple(apis))))


def render_error(helm: str, values: dict, apis: tuple[str, ...] = KEDA_API) -> str:
    out = _run_helm(helm, "template", "sf", str(CHART), values=values, apis=apis)
    assert out.returncode != 0, "the chart rendered values it should refuse"
    return out.stderr


def one(docs: list[dict], kind: str, component: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind
             and (component is None or d["metadata"]["labels"].get("app.kubernetes.io/component") == component)]
    assert len(found) == 1, f"{len(found)} {kind} documents"
    return found[0]


def workload(docs: list[dict]) -> dict:
    found = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    assert len(found) == 1, [d["kind"] for d in found]
    return found[0]


def worker_container(docs: list[dict]) -> dict:
    (container,) = [c for c in workload(docs)["spec"]["template"]["spec"]["containers"] if c["name"] == "worker"]
    return container


def env_of(container: dict) -> dict[str, dict]:
    """Each variable's entry (value or valueFrom) by name; names must be unique."""
    names = [e["name"] for e in container["env"]]
    assert len(names) == len(set(names)), names
    return {e["name"]: e for e in container["env"]}


def plain_env(container: dict) -> dict[str, str]:
    """The environment the worker sees, references to Secrets and fields replaced by placeholders."""
    out = {}
    for name, entry in env_of(container).items():
        if "value" in entry:
            out[name] = entry["value"]
        elif "fieldRef" in entry["valueFrom"]:
            out[name] = "pod-0"
        elif not entry["valueFrom"].get("secretKeyRef", {}).get("optional"):
            out[name] = "from-a-secret"
    return out


def _mebibytes(quantity: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Mi|Gi)", quantity)
    assert match, quantity
    return float(match[1]) * (1024 if match[2] == "Gi" else 1)


# ------------------------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("case", ["defaults", "everything"])
def test_lint_strict(helm, case):
    out = _run_helm(helm, "lint", "--strict", str(CHART), values=CASES[case])
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_document_validates_against_the_kubernetes_schemas(helm, case):
    docs = render(helm, {**CASES[case], "serviceMonitor": {"enabled": True}}, apis=KEDA_API)
    kinds = {d["kind"] for d in docs}
    assert {"ServiceAccount", "Service", "PodDisruptionBudget", "Job", "ConfigMap"} <= kinds
    for doc in docs:
        if doc["kind"] in CUSTOM_KINDS:
            continue
        for version in KUBE_VERSIONS:
            # strict: a misspelt or misplaced field is an error, not silently dropped by the API server
            kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_keda_resources_have_the_fields_keda_requires(helm, case):
    docs = render(helm, CASES[case], apis=KEDA_API)
    scaled = [d for d in docs if d["kind"] == "ScaledObject"]
    if case == "no-autoscaling":
        assert not scaled
        return
    (so,) = scaled
    assert so["apiVersion"] == "keda.sh/v1alpha1"
    spec = so["spec"]
    # the fields of KEDA's ScaledObject CRD (keda.sh/v1alpha1): a misspelt one would be pruned silently
    assert set(spec) <= {"scaleTargetRef", "minReplicaCount", "maxReplicaCount", "idleReplicaCount", "pollingInterval",
                         "cooldownPeriod", "initialCooldownPeriod", "fallback", "advanced", "triggers"}
    assert set(spec["scaleTargetRef"]) <= {"apiVersion", "kind", "name", "envSourceContainerName"}
    assert spec["scaleTargetRef"]["name"] and spec["triggers"]
    assert set(spec["advanced"]) <= {"horizontalPodAutoscalerConfig", "restoreToOriginalReplicaCount", "scalingModifiers"}
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    for policy in behavior["scaleDown"]["policies"]:
        assert set(policy) == {"type", "value", "periodSeconds"} and policy["type"] in ("Pods", "Percent")
        assert 0 < policy["periodSeconds"] <= 1800 and policy["value"] > 0
    assert 0 <= behavior["scaleDown"]["stabilizationWindowSeconds"] <= 3600
    for trigger in spec["triggers"]:
        assert set(trigger) <= {"type", "name", "metadata", "authenticationRef", "metricType", "useCachedMetrics"}
        assert trigger["type"] == "kafka"
        # trigger metadata is a map of strings in KEDA's CRD: a YAML number or boolean is refused
        assert all(isinstance(v, str) for v in trigger["metadata"].values()), trigger["metadata"]
    for auth in (d for d in docs if d["kind"] == "TriggerAuthentication"):
        assert auth["apiVersion"] == "keda.sh/v1alpha1"
        for ref in auth["spec"]["secretTargetRef"]:
            assert set(ref) == {"parameter", "name", "key"}
            assert ref["parameter"] in {"username", "password", "ca", "cert", "key", "keyPassword"}
        names = {t["authenticationRef"]["name"] for t in spec["triggers"]}
        assert names == {auth["metadata"]["name"]}


def test_rendered_environment_is_accepted_by_the_worker_settings(helm):
    for case, values in CASES.items():
        docs = render(helm, values)
        for container in (worker_container(docs), one(docs, "Job")["spec"]["template"]["spec"]["containers"][0]):
            env = plain_env(container)
            assert all(k.startswith("STREAMFOREST_") for k in env), case
            load_settings(env)  # raises ConfigError naming any unknown or bad variable


def test_deployment_by_default_statefulset_with_static_membership(helm):
    docs = render(helm)
    assert workload(docs)["kind"] == "Deployment"
    env = env_of(worker_container(docs))
    assert "STREAMFOREST_WORKER__STATIC_MEMBERSHIP" not in env and "STREAMFOREST_WORKER__MEMBER_NAME" not in env

    docs = render(helm, STATIC)
    sts = workload(docs)
    assert sts["kind"] == "StatefulSet"
    env = env_of(worker_container(docs))
    assert env["STREAMFOREST_WORKER__STATIC_MEMBERSHIP"]["value"] == "true"
    # the member name (group.instance.id) is the pod name: stable across a StatefulSet pod's restarts
    assert env["STREAMFOREST_WORKER__MEMBER_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    settings = load_settings(plain_env(worker_container(docs)))
    assert settings.worker.static_membership and settings.member_name == "pod-0"
    # its governing service exists and is headless
    (members,) = [d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == sts["spec"]["serviceName"]]
    assert members["spec"]["clusterIP"] == "None"


def test_probes_on_the_metrics_port(helm):
    for values in CASES.values():
        container = worker_container(render(helm, values))
        port = int(env_of(container)["STREAMFOREST_WORKER__METRICS_PORT"]["value"])
        (named,) = [p for p in container["ports"] if p["name"] == "metrics"]
        assert named["containerPort"] == port
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
        assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        # the startup probe waits at least as long as the worker waits for the brokers (60 s)
        startup = container["startupProbe"]
        assert startup["periodSeconds"] * startup["failureThreshold"] >= 60


def test_pod_disruption_budget_selects_the_workers_only(helm):
    for values in CASES.values():
        docs = render(helm, values)
        pdb = one(docs, "PodDisruptionBudget")
        assert pdb["spec"]["maxUnavailable"] == 1
        selector = pdb["spec"]["selector"]["matchLabels"]
        pod_labels = workload(docs)["spec"]["template"]["metadata"]["labels"]
        job_labels = one(docs, "Job")["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= pod_labels.items()
        assert not selector.items() <= job_labels.items()
        assert selector == workload(docs)["spec"]["selector"]["matchLabels"]


def test_non_root_read_only_root_filesystem(helm):
    image_user = re.search(r"useradd .*--uid (\d+)", DOCKERFILE.read_text())[1]
    for values in CASES.values():
        docs = render(helm, values)
        for pod in (workload(docs)["spec"]["template"]["spec"], one(docs, "Job")["spec"]["template"]["spec"]):
            assert pod["securityContext"]["runAsNonRoot"] is True
            assert str(pod["securityContext"]["runAsUser"]) == image_user
            assert pod["automountServiceAccountToken"] is False
            for container in pod.get("initContainers", []) + pod["containers"]:
                sc = container["securityContext"]
                assert sc["readOnlyRootFilesystem"] is True, container["name"]
                assert sc["allowPrivilegeEscalation"] is False
                assert sc["capabilities"]["drop"] == ["ALL"]


def test_numba_cache_of_the_image_is_mounted_writable(helm):
    image_cache = re.search(r"NUMBA_CACHE_DIR=(\S+)", DOCKERFILE.read_text())[1]
    pod = workload(render(helm))["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in worker_container(render(helm))["volumeMounts"]}
    # the worker's NUMBA_CACHE_DIR is an emptyDir (writable on a read-only root) ...
    assert "emptyDir" in volumes[mounts[image_cache]]
    assert "emptyDir" in volumes[mounts["/tmp"]]
    # ... seeded by an init container from the same path of the same image
    (init,) = pod["initContainers"]
    assert init["image"] == worker_container(render(helm))["image"]
    assert image_cache in init["command"]
    (seed,) = init["volumeMounts"]
    assert seed["name"] == mounts[image_cache] and init["command"][-2:] == [image_cache, seed["mountPath"]]


def test_numba_cache_seeding_copies_the_cache(helm, tmp_path):
    """The init container's command, run here on two directories: it copies a cache, and an image
    without one (built without the warm-up) does not stop the pod."""
    init = workload(render(helm))["spec"]["template"]["spec"]["initContainers"][0]
    program, *rest = init["command"]
    assert program == "python"
    source, target = tmp_path / "image-cache", tmp_path / "seed"
    (source / "models").mkdir(parents=True)
    (source / "models" / "kernel.nbi").write_bytes(b"index")
    target.mkdir()
    subprocess.run([sys.executable, *rest[:-2], str(source), str(target)], check=True, timeout=60)
    assert (target / "models" / "kernel.nbi").read_bytes() == b"index"
    subprocess.run([sys.executable, *rest[:-2], str(tmp_path / "absent"), str(target)], check=True, timeout=60)


def test_sasl_and_tls_settings_come_from_secrets(helm):
    docs = render(helm, SASL_TLS, apis=KEDA_API)
    secret = SASL_TLS["kafka"]["auth"]["existingSecret"]
    for container in (worker_container(docs), one(docs, "Job")["spec"]["template"]["spec"]["containers"][0]):
        env = env_of(container)
        for name, key in (("STREAMFOREST_KAFKA__SASL_USERNAME", "sasl-username"),
                          ("STREAMFOREST_KAFKA__SASL_PASSWORD", "sasl-password")):
            assert "value" not in env[name]
            assert env[name]["valueFrom"]["secretKeyRef"] == {"name": secret, "key": key}
        assert env["STREAMFOREST_KAFKA__SSL_KEY_PASSWORD"]["valueFrom"]["secretKeyRef"]["optional"] is True
        tls_mount = next(m for m in container["volumeMounts"] if m["name"] == "kafka-tls")
        assert tls_mount["readOnly"] is True
        for var in ("SSL_CA_LOCATION", "SSL_CERTIFICATE_LOCATION", "SSL_KEY_LOCATION"):
            assert env[f"STREAMFOREST_KAFKA__{var}"]["value"].startswith(tls_mount["mountPath"] + "/")
    pod = workload(docs)["spec"]["template"]["spec"]
    assert {"name": "kafka-tls", "secret": {"secretName": "kafka-tls"}} in pod["volumes"]
    # no Secret is rendered: the chart only refers to the one the operator created
    assert not [d for d in docs if d["kind"] == "Secret"]
    # KEDA reads the lag with the same credentials
    refs = one(docs, "TriggerAuthentication")["spec"]["secretTargetRef"]
    assert {(r["parameter"], r["name"]) for r in refs} == {
        ("username", secret), ("password", secret), ("ca", "kafka-tls"), ("cert", "kafka-tls"), ("key", "kafka-tls")}
    for trigger in one(docs, "ScaledObject")["spec"]["triggers"]:
        assert trigger["metadata"]["sasl"] == "scram_sha512" and trigger["metadata"]["tls"] == "enable"

    # plaintext: no secret references, no TriggerAuthentication
    docs = render(helm)
    assert not [e for e in worker_container(docs)["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    assert not [d for d in docs if d["kind"] == "TriggerAuthentication"]


@pytest.mark.parametrize(("values", "message"), [
    ({"kafka": {"securityProtocol": "SASL_SSL", "saslMechanism": "PLAIN"}}, "kafka.auth.existingSecret"),
    ({"kafka": {"securityProtocol": "SASL_SSL", "auth": {"existingSecret": "s"}}}, "kafka.saslMechanism"),
    ({"kafka": {"securityProtocol": "SSL", "tls": {"enabled": True}}}, "kafka.tls.secretName"),
    ({"kafka": {"tls": {"enabled": True, "secretName": "t"}}}, "needs kafka.securityProtocol SSL or SASL_SSL"),
])
def test_incomplete_security_settings_are_refused(helm, values, message):
    assert message in render_error(helm, values)


@pytest.mark.parametrize("values", [{"worker": {"stateBudgetMb": 512}}, {"topics": {"partitions": 0}},
                                    {"autoscaling": {"maxReplicas": 3}}, {"env": {"LEARNERS__BATCH_SIZE": 5}}])
def test_misspelt_or_invalid_values_are_refused(helm, values):
    # values.schema.json: a key the templates never read would otherwise be ignored without a word
    assert "schema" in render_error(helm, values)


def test_env_cannot_override_what_the_chart_derives(helm):
    # e.g. a state budget set under `env` would no longer match the memory derived from worker.stateBudgetMB
    assert "set by the chart" in render_error(helm, {"env": {"STREAMFOREST_WORKER__STATE_BUDGET_MB": "4096"}})
    env = env_of(worker_container(render(helm, {"env": {"STREAMFOREST_LEARNERS__BATCH_SIZE": 50}})))
    assert env["STREAMFOREST_LEARNERS__BATCH_SIZE"]["value"] == "50"


@pytest.mark.parametrize("timeout", [20, 45.5, 120])
def test_termination_grace_covers_the_shutdown_bound(helm, timeout):
    docs = render(helm, {"worker": {"shutdownTimeoutSeconds": timeout}})
    grace = workload(docs)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    settings = load_settings(plain_env(worker_container(docs)))
    assert settings.worker.shutdown_timeout_s == timeout
    # the worker's watchdog ends the process shutdown_timeout_s after SIGTERM; SIGKILL must come later
    assert grace >= settings.worker.shutdown_timeout_s + 5


def test_topics_job_is_a_pre_install_and_pre_upgrade_hook(helm):
    docs = render(helm, EVERYTHING)
    job = one(docs, "Job")
    hooks = job["metadata"]["annotations"]["helm.sh/hook"].split(",")
    assert {"pre-install", "pre-upgrade"} <= set(hooks)
    assert "before-hook-creation" in job["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] + container["args"] == ["streamforest", "topics", "create"]
    job_settings = load_settings(plain_env(container))
    worker_settings = load_settings(plain_env(worker_container(docs)))
    # the job creates exactly the topics the workers read and write, with the chart's partitions
    assert job_settings.topics == worker_settings.topics
    assert job_settings.topics.partitions == 12
    assert job_settings.kafka.bootstrap_servers == worker_settings.kafka.bootstrap_servers

    assert not [d for d in render(helm, {"topics": {"create": {"enabled": False}}}) if d["kind"] == "Job"]


def test_latest_state_topic_is_on_by_default_and_empty_turns_it_off(helm):
    assert load_settings(plain_env(worker_container(render(helm)))).topics.latest == "sf.latest"
    docs = render(helm, {"topics": {"latest": ""}})
    for container in (worker_container(docs), one(docs, "Job")["spec"]["template"]["spec"]["containers"][0]):
        assert load_settings(plain_env(container)).topics.latest is None


@pytest.mark.parametrize("partitions", [1, 4, 12])
def test_keda_scales_on_lag_up_to_the_partition_count(helm, partitions):
    docs = render(helm, {"topics": {"partitions": partitions}, **STATIC}, apis=KEDA_API)
    so = one(docs, "ScaledObject")
    settings = load_settings(plain_env(worker_container(docs)))
    assert so["spec"]["maxReplicaCount"] == settings.topics.partitions == partitions
    target = workload(docs)
    assert so["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": target["kind"],
                                           "name": target["metadata"]["name"]}
    # KEDA's HorizontalPodAutoscaler owns the replica count
    assert "replicas" not in target["spec"]
    triggers = so["spec"]["triggers"]
    assert {t["metadata"]["topic"] for t in triggers} == {settings.topics.instances, settings.topics.features}
    for t in triggers:
        assert t["metadata"]["consumerGroup"] == settings.kafka.group_id
        assert t["metadata"]["bootstrapServers"] == settings.kafka.bootstrap_servers
        assert t["metadata"]["allowIdleConsumers"] == "false"
        assert int(t["metadata"]["lagThreshold"]) > 0


def test_replicas_beyond_the_partitions_are_refused_for_autoscaling(helm):
    assert "exceeds topics.partitions" in render_error(
        helm, {"topics": {"partitions": 4}, "autoscaling": {"maxReplicaCount": 6}})
    docs = render(helm, {"topics": {"partitions": 8}, "autoscaling": {"maxReplicaCount": 6}}, apis=KEDA_API)
    assert one(docs, "ScaledObject")["spec"]["maxReplicaCount"] == 6
    docs = render(helm, NO_AUTOSCALING, apis=KEDA_API)
    assert workload(docs)["spec"]["replicas"] == 3 and not [d for d in docs if d["kind"] == "ScaledObject"]


@pytest.mark.parametrize("budget", [256, 1024, 2048, 3000])
def test_memory_is_sized_from_the_state_budget(helm, budget):
    docs = render(helm, {"worker": {"stateBudgetMB": budget}})
    container = worker_container(docs)
    settings = load_settings(plain_env(container))
    assert settings.worker.state_budget_mb == budget
    resources = container["resources"]
    # Guaranteed memory: request = limit
    assert resources["requests"]["memory"] == resources["limits"]["memory"]
    limit = _mebibytes(resources["limits"]["memory"])
    values = yaml.safe_load((CHART / "values.yaml").read_text())["memory"]
    assert limit == -(-(values["baselineMiB"] + budget * (1 + values["headroomPercent"] / 100)) // 1)
    # a worker's baseline resident memory was measured at 160-250 MiB: the budget fits above it
    assert limit >= 250 + budget * 1.1
    assert resources["requests"]["cpu"] and resources["limits"]["cpu"]


# ------------------------------------------------------------------------------------ configuration file

LEARNERS = {
    "learners": {"predictor": ["online_random_forest"], "rankers": ["online_random_forest"], "batch_size": 50,
                 "seed": 12345678901, "params": {"online_random_forest": {"n_trees": 20}}},
    "profiles": [{"match": "reg-*", "name": "regression", "task": "regression", "predictor": "isoup_symrf",
                  "rankers": "isoup_symrf"},
                 {"match": "fast-*", "batch_size": 10, "top_k": 3, "selector": None}],
}


def config_file_of(docs: list[dict], tmp_path: Path) -> Path:
    """The configuration file the worker container reads, written where the test can read it."""
    container = worker_container(docs)
    assert container["args"][:2] == ["run", "--config"]
    path = container["args"][2]
    pod = workload(docs)["spec"]["template"]["spec"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "config"]
    assert mount["readOnly"] is True and path == f"{mount['mountPath']}/streamforest.toml"
    (volume,) = [v for v in pod["volumes"] if v["name"] == "config"]
    cm = one(docs, "ConfigMap")
    assert volume["configMap"]["name"] == cm["metadata"]["name"]
    out = tmp_path / "streamforest.toml"
    out.write_text(cm["data"]["streamforest.toml"])
    return out


def test_configuration_file_is_rendered_from_structured_learners_and_profiles(helm, tmp_path):
    docs = render(helm, LEARNERS)
    path = config_file_of(docs, tmp_path)
    data = tomllib.loads(path.read_text())
    # the values, key for key (whole numbers stay whole; a null is left out)
    assert data["learners"] == LEARNERS["learners"]
    assert data["profiles"] == [LEARNERS["profiles"][0], {"match": "fast-*", "batch_size": 10, "top_k": 3}]
    # what the worker loads: the file under the chart's environment
    settings = load_settings(plain_env(worker_container(docs)), config_file=path)
    assert settings.learners.batch_size == 50 and settings.learners.seed == 12345678901
    profiles = stream_profiles(settings)
    assert profiles.for_stream("reg-1").predictor == ("isoup_symrf",)
    assert profiles.for_stream("fast-1").batch_size == 10
    assert profiles.for_stream("x").params["online_random_forest"]["n_trees"] == 20
    # and what `evaluate --configs` replays for the same file
    ((name, candidate),) = evaluate_configs.load(path, load_settings({}))
    assert name == "streamforest.toml"
    assert [p for p, _ in candidate.rules] == [p for p, _ in profiles.rules]
    # a change of the file rolls the pods
    checksum = workload(docs)["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    other = workload(render(helm, {"learners": {"batch_size": 51}}))["spec"]["template"]["metadata"]["annotations"]
    assert other["checksum/config"] != checksum


def test_default_configuration_file_is_valid_and_env_overrides_it(helm, tmp_path):
    for case, values in CASES.items():
        docs = render(helm, values)
        path = config_file_of(docs, tmp_path)
        assert load_settings(plain_env(worker_container(docs)), config_file=path).learners.batch_size == (
            50 if case == "everything" else 100), case
    docs = render(helm, {**LEARNERS, "env": {"STREAMFOREST_LEARNERS__BATCH_SIZE": 70}})
    path = config_file_of(docs, tmp_path)
    assert load_settings(plain_env(worker_container(docs)), config_file=path).learners.batch_size == 70


def test_output_formats_are_rendered_into_the_file_and_default_to_the_workers(helm, tmp_path):
    docs = render(helm)
    path = config_file_of(docs, tmp_path)
    assert "output" not in tomllib.loads(path.read_text())
    output = load_settings(plain_env(worker_container(docs)), config_file=path).output
    assert [output.format_of(k) for k in OUTPUT_KINDS] == ["msgpack", "json", "json"]
    docs = render(helm, {"output": {"format": "json", "predictions": "msgpack", "drift": None,
                                    "prediction_batches": True}})
    path = config_file_of(docs, tmp_path)
    assert tomllib.loads(path.read_text())["output"] == {"format": "json", "predictions": "msgpack",
                                                         "prediction_batches": True}
    output = load_settings(plain_env(worker_container(docs)), config_file=path).output
    assert [output.format_of(k) for k in OUTPUT_KINDS] == ["msgpack", "json", "json"]
    assert output.prediction_batches is True
    # `env` overrides the file key by key: format from the environment, predictions still from the file
    docs = render(helm, {"output": {"predictions": "json"}, "env": {"STREAMFOREST_OUTPUT__FORMAT": "msgpack"}})
    output = load_settings(plain_env(worker_container(docs)), config_file=config_file_of(docs, tmp_path)).output
    assert [output.format_of(k) for k in OUTPUT_KINDS] == ["json", "msgpack", "msgpack"]


@pytest.mark.parametrize("values", [{"output": {"formats": "json"}}, {"output": {"drift": "avro"}}])
def test_misspelt_or_invalid_output_values_are_refused(helm, values):
    assert "schema" in render_error(helm, values)


@pytest.mark.parametrize("values", [{"learners": {"batchsize": 5}}, {"learners": {"batch_size": 0}},
                                    {"profiles": [{"predictor": "hoeffding_tree"}]},
                                    {"profiles": [{"match": "a-*", "held_rows": 5}]}])
def test_misspelt_learners_or_profiles_are_refused(helm, values):
    assert "schema" in render_error(helm, values)


# ------------------------------------------------------------------------------------ KEDA, ServiceMonitor


def test_keda_only_where_its_api_is_served_unless_forced(helm):
    # a cluster without KEDA: no ScaledObject (it would fail the install), the workers run `replicas`
    docs = render(helm)
    assert not [d for d in docs if d["kind"] in KEDA_KINDS]
    assert workload(docs)["spec"]["replicas"] == 2
    # with KEDA: the ScaledObject owns the replica count
    docs = render(helm, apis=KEDA_API)
    assert one(docs, "ScaledObject") and "replicas" not in workload(docs)["spec"]
    # forced on (helm template for GitOps, KEDA installed later) or off
    docs = render(helm, {"autoscaling": {"keda": {"enabled": True}}, **SASL_TLS})
    assert one(docs, "ScaledObject") and one(docs, "TriggerAuthentication")
    assert "replicas" not in workload(docs)["spec"]
    docs = render(helm, {"autoscaling": {"keda": {"enabled": False}}}, apis=KEDA_API)
    assert not [d for d in docs if d["kind"] in KEDA_KINDS] and workload(docs)["spec"]["replicas"] == 2
    # autoscaling.enabled false wins over everything
    docs = render(helm, {"autoscaling": {"enabled": False, "keda": {"enabled": True}}}, apis=KEDA_API)
    assert not [d for d in docs if d["kind"] in KEDA_KINDS]
    # the partition bound is checked only where the ScaledObject renders
    render(helm, {"topics": {"partitions": 4}, "autoscaling": {"maxReplicaCount": 6}})
    assert "exceeds topics.partitions" in render_error(
        helm, {"topics": {"partitions": 4}, "autoscaling": {"maxReplicaCount": 6, "keda": {"enabled": True}}}, apis=())


def test_service_monitor_only_when_enabled_selects_the_metrics_service(helm):
    for apis in ((), ("monitoring.coreos.com/v1",)):
        docs = render(helm, apis=apis)
        assert not [d for d in docs if d["kind"] == "ServiceMonitor"]
        annotations = workload(docs)["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
    docs = render(helm, {**STATIC, "serviceMonitor": {"enabled": True, "interval": "15s",
                                                       "labels": {"release": "prometheus"}}})
    sm = one(docs, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["labels"]["release"] == "prometheus"
    spec = sm["spec"]
    assert set(spec) <= {"selector", "namespaceSelector", "endpoints", "jobLabel", "targetLabels", "podTargetLabels"}
    selector = spec["selector"]["matchLabels"]
    services = [d for d in docs if d["kind"] == "Service"]
    assert len(services) == 2  # the metrics Service and the StatefulSet's governing one
    (selected,) = [s for s in services if selector.items() <= s["metadata"]["labels"].items()]
    assert selected["metadata"]["name"] == "sf-streamforest-metrics"
    (endpoint,) = spec["endpoints"]
    assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout"}
    assert endpoint["port"] in {p["name"] for p in selected["spec"]["ports"]}
    assert (endpoint["path"], endpoint["interval"]) == ("/metrics", "15s")
    # one scrape: the pods' prometheus.io annotations give way to the ServiceMonitor
    annotations = workload(docs)["spec"]["template"]["metadata"]["annotations"]
    assert not [k for k in annotations if k.startswith("prometheus.io/")]
