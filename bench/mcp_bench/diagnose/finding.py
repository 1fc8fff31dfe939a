"""What a detector says: one finding per trap, with its evidence.

A finding is ``Found`` (the trap is there), ``NotFound`` (the data to see it was there and it is
not) or ``NoData`` (the data was missing; ``needs`` says what would let the detector decide). A
detector without its data never says ``NotFound``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

State = Literal["Found", "NotFound", "NoData"]
FOUND: State = "Found"
NOT_FOUND: State = "NotFound"
NO_DATA: State = "NoData"
Value = float | int | str | None


class Finding(BaseModel):
    """One detector's answer: the trap, the state, the figures it judged against its thresholds,
    where they came from and one line of advice."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trap: int = Field(ge=0, le=12, description="1..12; 0 is the bottleneck-layer screening")
    key: str = Field(description="short name, e.g. false-wait")
    name: str
    state: State
    summary: str = Field(description="one line: what was seen")
    level: str | None = Field(default=None, description="the load level that decided, when per level")
    values: dict[str, Value] = Field(default_factory=dict)
    thresholds: dict[str, float] = Field(default_factory=dict)
    source: str = Field(default="", description="the data the figures come from")
    advice: str = ""
    needs: str = Field(default="", description="NoData: what the detector would need")

    @property
    def label(self) -> str:
        return "screening" if self.trap == 0 else f"trap {self.trap}"
