"""Drills: staged load against the target, faults injected in the stages (journaled before
they are applied, always reverted), and the KPI board that judges what clients saw."""
