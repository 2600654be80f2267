"""MIG profile catalogue (NVIDIA MIG user guide, "Supported MIG Profiles"), and the fit rule's choice.

Memory is the size the profile's name states (GB, as NVIDIA names them); compute is in sevenths of the GPU.
The `+me` media-extension variants have the same memory and compute as their base profile and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MigProfile:
    name: str
    memory_gib: float
    sevenths: int

    @property
    def compute_fraction(self) -> str:
        return "the full GPU" if self.sevenths == 7 else f"{self.sevenths}/7"


def _profiles(*spec: tuple[str, float, int]) -> tuple[MigProfile, ...]:
    return tuple(MigProfile(name, memory, sevenths) for name, memory, sevenths in spec)


A100_40GB = _profiles(
    ("1g.5gb", 5, 1), ("1g.10gb", 10, 1), ("2g.10gb", 10, 2), ("3g.20gb", 20, 3), ("4g.20gb", 20, 4),
    ("7g.40gb", 40, 7),
)  # fmt: skip
A100_80GB = _profiles(
    ("1g.10gb", 10, 1), ("1g.20gb", 20, 1), ("2g.20gb", 20, 2), ("3g.40gb", 40, 3), ("4g.40gb", 40, 4),
    ("7g.80gb", 80, 7),
)  # fmt: skip
H100_80GB = A100_80GB
H200_141GB = _profiles(
    ("1g.18gb", 18, 1), ("1g.35gb", 35, 1), ("2g.35gb", 35, 2), ("3g.71gb", 71, 3), ("4g.71gb", 71, 4),
    ("7g.141gb", 141, 7),
)  # fmt: skip

# Matched against the GPU model as NVML names it (e.g. "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3").
CATALOGUE: tuple[tuple[tuple[str, ...], tuple[MigProfile, ...]], ...] = (
    (("A100", "80GB"), A100_80GB),
    (("A100", "40GB"), A100_40GB),
    (("A100",), A100_40GB),
    (("H100",), H100_80GB),
    (("H200",), H200_141GB),
)


def mig_profiles(gpu_model: str) -> tuple[MigProfile, ...]:
    """The profiles a GPU model offers, smallest first; empty when the model has no MIG we know of."""
    name = gpu_model.upper().replace(" ", "")
    for needles, profiles in CATALOGUE:
        if all(needle in name for needle in needles):
            return profiles
    return ()


def mig_smallest_fit(gpu_model: str, need_gib: float) -> MigProfile | None:
    """The smallest profile (least compute, then least memory) whose memory holds `need_gib`."""
    fits = [p for p in mig_profiles(gpu_model) if p.memory_gib >= need_gib]
    return min(fits, key=lambda p: (p.sevenths, p.memory_gib), default=None)
