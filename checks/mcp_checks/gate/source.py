"""Where the gate reads its MCPReadiness: the API server, through the ``kubernetes`` client
(get, list and watch of mcpreadinesses), and how a failure of it counts."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from .args import GROUP, PLURAL, VERSION, UsageError

IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
Obj = Mapping[str, Any]


class GateApiError(Exception):
    """The API server refused in a way waiting cannot fix (401, 403, a bad request)."""


class CannotAppear(Exception):
    """What the gate lives in does not exist (its namespace, or the MCPReadiness kind): no
    verdict can come by waiting, so it is a usage error, not a timeout."""


class GateSource(Protocol):
    """Reads of one MCPReadiness: the object now, and a watch of it from a resourceVersion."""

    def get(self) -> Obj | None: ...

    def missing(self) -> str | None:
        """Why the gate cannot appear (its namespace or kind does not exist); None: it may."""
        ...

    def changes(self, resource_version: str | None, timeout_s: float) -> Iterator[tuple[str, Obj]]: ...


class Transient(Exception):
    """An API error worth retrying until the deadline (5xx, 429, a broken connection, 410 Gone)."""


class ApiSource:
    """The MCPReadiness through the ``kubernetes`` client: get, and a watch (list with a field
    selector on its name, from the resourceVersion last read)."""

    def __init__(self, api_client: Any, namespace: str, name: str) -> None:
        from kubernetes import client

        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.namespace, self.name = namespace, name
        self.version = VERSION

    def _translate(self, exc: Exception) -> Exception:
        from kubernetes.client.exceptions import ApiException

        if isinstance(exc, ApiException):
            if exc.status in (401, 403, 400, 422):
                return GateApiError(f"{exc.status} {exc.reason}: {_api_message(exc)}")
            return Transient(f"{exc.status} {exc.reason}")
        return Transient(f"{type(exc).__name__}: {exc}")

    def get(self) -> Obj | None:
        from kubernetes.client.exceptions import ApiException

        try:
            obj: Obj = self.custom.get_namespaced_custom_object(
                GROUP, self.version, self.namespace, PLURAL, self.name, _request_timeout=30
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise self._translate(exc) from exc
        except Exception as exc:  # urllib3's connection errors and timeouts
            raise self._translate(exc) from exc
        return obj

    def missing(self) -> str | None:
        """A 404 on the list of mcpreadinesses (the API server does not serve the kind: the CRD
        is not installed) or on the namespace (it does not exist; or it is being deleted). Not
        allowed to read the namespace (a Role cannot grant it): cannot tell, so None."""
        from kubernetes.client.exceptions import ApiException

        try:
            self.custom.list_namespaced_custom_object(
                GROUP, self.version, self.namespace, PLURAL, limit=1, _request_timeout=30
            )
        except ApiException as exc:
            if exc.status == 404:
                return (
                    f"the API server does not serve {PLURAL}.{GROUP}/{self.version}: the MCPReadiness "
                    "CRD is not installed in this cluster (kubectl apply -f crds/)"
                )
            raise self._translate(exc) from exc
        except Exception as exc:
            raise self._translate(exc) from exc
        try:
            namespace = self.core.read_namespace(self.namespace, _request_timeout=30)
        except ApiException as exc:
            if exc.status == 404:
                return f"namespace {self.namespace!r} does not exist (-n/--namespace, or the kubeconfig's)"
            if exc.status in (401, 403):
                return None
            raise self._translate(exc) from exc
        except Exception as exc:
            raise self._translate(exc) from exc
        if getattr(namespace.status, "phase", None) == "Terminating":
            return f"namespace {self.namespace!r} is being deleted: nothing can be created in it"
        return None

    def changes(self, resource_version: str | None, timeout_s: float) -> Iterator[tuple[str, Obj]]:
        from kubernetes import watch

        stream = watch.Watch()
        kwargs: dict[str, Any] = {
            "field_selector": f"metadata.name={self.name}",
            "timeout_seconds": max(1, int(timeout_s)),
            "_request_timeout": int(timeout_s) + 15,
            "allow_watch_bookmarks": False,
        }
        if resource_version:
            kwargs["resource_version"] = resource_version
        try:
            for event in stream.stream(
                self.custom.list_namespaced_custom_object,
                GROUP,
                self.version,
                self.namespace,
                PLURAL,
                **kwargs,
            ):
                obj = event.get("object")
                if isinstance(obj, Mapping):
                    yield str(event.get("type")), obj
        except Exception as exc:
            raise self._translate(exc) from exc
        finally:
            stream.stop()


def _api_message(exc: Any) -> str:
    try:
        return str(json.loads(exc.body).get("message") or exc.body)
    except (TypeError, ValueError, AttributeError):
        return str(getattr(exc, "body", "") or exc)


def connect(kubeconfig: str | None, context: str | None) -> tuple[Any, str | None]:
    """An ApiClient and the namespace its configuration names (None: not named)."""
    from kubernetes import client, config

    try:
        api = config.new_client_from_config(config_file=kubeconfig, context=context)
    except (config.ConfigException, OSError, TypeError, ValueError) as exc:
        if kubeconfig is not None or context is not None:
            flags = "/".join(f for f, v in (("--kubeconfig", kubeconfig), ("--context", context)) if v)
            raise UsageError(f"argument {flags}: {exc}") from exc
        try:
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException as inner:
            raise UsageError(f"no kubeconfig and not in a cluster: {inner}") from inner
        namespace = IN_CLUSTER_NAMESPACE.read_text().strip() if IN_CLUSTER_NAMESPACE.exists() else None
        return client.ApiClient(configuration), namespace
    try:
        _, active = config.list_kube_config_contexts(config_file=kubeconfig)
        if context is not None:
            contexts, _ = config.list_kube_config_contexts(config_file=kubeconfig)
            active = next((c for c in contexts if c.get("name") == context), active)
        namespace = ((active or {}).get("context") or {}).get("namespace")
    except (config.ConfigException, OSError):
        namespace = None
    return api, namespace
