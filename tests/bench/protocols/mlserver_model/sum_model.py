"""A tiny MLServer model (no ML libraries): OUTPUT0 is the per-row sum of the FP32 input INPUT0.

Loaded by MLServer from ``model-settings.json`` in this folder; the V2 protocol tests send it
requests through the benchmark's Triton clients.
"""

import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class SumModel(MLModel):
    async def load(self) -> bool:
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        x = NumpyCodec.decode_input(payload.inputs[0]).astype(np.float32)
        total = x.reshape(x.shape[0], -1).sum(axis=1, keepdims=True)
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            outputs=[NumpyCodec.encode_output(name="OUTPUT0", payload=total)],
        )
