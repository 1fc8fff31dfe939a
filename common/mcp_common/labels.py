"""Kubernetes' label value syntax, as the API server checks it: every package whose specs take a
label selector (the operator's CRDs, ``mcp_checks``' check specs) refuses at admission what no
label can hold, so a pod list never answers 400 for it later."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

LABEL_VALUE = "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE)]
