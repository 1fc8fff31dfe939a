"""Config consistency: the hash of the named ConfigMaps and Secrets is what the workload's
current revision runs, no older revision still serves, and Argo CD synced what was expected."""

from .argocd import assess_application, expected_revision, resource_wave, waves_up_to
from .assessment import Assessment, combine
from .hashing import ConfigContent, canonical, config_hash, short
from .read import Observed, label_selector
from .rollout import assess_rollout, deployment_revisions, is_serving, statefulset_revisions
from .run import CHECK_NAME, evaluate, run_config_consistency
from .served import wait_served
from .spec import DEFAULT_ANNOTATION, ArgoApplicationRef, ConfigConsistencySpec, WorkloadKind

__all__ = [
    "CHECK_NAME",
    "DEFAULT_ANNOTATION",
    "ArgoApplicationRef",
    "Assessment",
    "ConfigConsistencySpec",
    "ConfigContent",
    "Observed",
    "WorkloadKind",
    "assess_application",
    "assess_rollout",
    "canonical",
    "combine",
    "config_hash",
    "deployment_revisions",
    "evaluate",
    "expected_revision",
    "is_serving",
    "label_selector",
    "resource_wave",
    "run_config_consistency",
    "short",
    "statefulset_revisions",
    "wait_served",
    "waves_up_to",
]
