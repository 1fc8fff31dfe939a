"""Leader election: of all the operator processes of one installation, only the holder of a
``coordination.k8s.io`` Lease runs kopf and its handlers; the others wait on standby. No kopf
import here (``cli`` wires kopf in), so the rules stay testable on their own."""

from .lease import LeaseConfig
from .run import lapsed, leader_identity, run

__all__ = ["LeaseConfig", "lapsed", "leader_identity", "run"]
