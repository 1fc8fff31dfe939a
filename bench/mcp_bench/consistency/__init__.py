"""Output consistency under load: fixed probe requests answered at rest and during each level,
their answers compared (token mismatch rate, L2 distance of numeric outputs), a level whose
answers drift past the plan's thresholds a finding whatever its latency."""
