"""NVIDIA's published MIG profiles: the one catalogue the ingest edge, pricing and the mig_fit rule read.

From the NVIDIA Multi-Instance GPU user guide ("Supported MIG Profiles") and the device plugin's mig-parted
configuration. A profile holds `slices` of the GPU's `total` compute slices (7 on A100/H100/H200/B200/GB200,
4 on A30 and RTX PRO 6000 Blackwell) and the memory its name states (GB as NVIDIA names them). A variant (`+me`
media extensions, `+gfx`, `-me`) holds the same slices and memory as its base profile. A deployment adds more
with `MIG_EXTRA_PROFILES` (`name=slices/total:mem_gib`, comma-separated; see `mig_extra_parse`). No Django here:
the agent imports it too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache


@dataclass(frozen=True, slots=True)
class MigProfile:
    name: str
    slices: int
    total: int
    memory_gib: int

    @property
    def fraction(self) -> Fraction:
        """The share of the whole GPU it is priced at: its compute slices of the GPU's."""
        return Fraction(self.slices, self.total)

    @property
    def compute_fraction(self) -> str:
        return "the full GPU" if self.slices == self.total else f"{self.slices}/{self.total}"

    @property
    def variant(self) -> bool:
        """A variant of a base profile ('1g.10gb+me', '1g.24gb+gfx', '1g.24gb-me'): same size, other engines."""
        return "+" in self.name or "-" in self.name


def _family(total: int, *spec: tuple[str, int], media: Iterable[str] = ()) -> tuple[MigProfile, ...]:
    """Profiles of one GPU from (name, memory GiB); slices come from the name ('3g.40gb': 3). `media`: the
    profiles NVIDIA also offers with media extensions."""
    plain = [MigProfile(name, int(name.partition("g.")[0]), total, memory) for name, memory in spec]
    extended = [MigProfile(f"{p.name}+me", p.slices, p.total, p.memory_gib) for p in plain if p.name in media]
    return tuple(sorted(plain + extended, key=lambda p: (p.slices, p.memory_gib, p.name)))


A30_24GB = _family(4, ("1g.6gb", 6), ("2g.12gb", 12), ("4g.24gb", 24), media=("1g.6gb", "2g.12gb"))
A100_40GB = _family(
    7, ("1g.5gb", 5), ("1g.10gb", 10), ("2g.10gb", 10), ("3g.20gb", 20), ("4g.20gb", 20), ("7g.40gb", 40),
    media=("1g.5gb",),
)  # fmt: skip
A100_80GB = _family(
    7, ("1g.10gb", 10), ("1g.20gb", 20), ("2g.20gb", 20), ("3g.40gb", 40), ("4g.40gb", 40), ("7g.80gb", 80),
    media=("1g.10gb",),
)  # fmt: skip
H100_80GB = A100_80GB
H100_94GB = _family(
    7, ("1g.12gb", 12), ("1g.24gb", 24), ("2g.24gb", 24), ("3g.47gb", 47), ("4g.47gb", 47), ("7g.94gb", 94),
    media=("1g.12gb",),
)  # fmt: skip
H100_96GB = _family(  # H100 on GH200, H20
    7, ("1g.12gb", 12), ("1g.24gb", 24), ("2g.24gb", 24), ("3g.48gb", 48), ("4g.48gb", 48), ("7g.96gb", 96),
    media=("1g.12gb",),
)  # fmt: skip
H200_141GB = _family(
    7, ("1g.18gb", 18), ("1g.35gb", 35), ("2g.35gb", 35), ("3g.71gb", 71), ("4g.71gb", 71), ("7g.141gb", 141),
    media=("1g.18gb",),
)  # fmt: skip
GH200_144GB = _family(
    7, ("1g.18gb", 18), ("1g.36gb", 36), ("2g.36gb", 36), ("3g.72gb", 72), ("4g.72gb", 72), ("7g.144gb", 144),
    media=("1g.18gb",),
)  # fmt: skip
B200_180GB = _family(
    7, ("1g.23gb", 23), ("1g.45gb", 45), ("2g.45gb", 45), ("3g.90gb", 90), ("4g.90gb", 90), ("7g.180gb", 180),
    media=("1g.23gb",),
)  # fmt: skip
GB200_186GB = _family(
    7, ("1g.23gb", 23), ("1g.47gb", 47), ("2g.47gb", 47), ("3g.93gb", 93), ("4g.93gb", 93), ("7g.186gb", 186),
    media=("1g.23gb",),
)  # fmt: skip
# RTX PRO 6000 Blackwell (96 GB) splits in 4; beside `+me` it offers graphics (`+gfx`), no-media (`-me`) and
# all-media (`+me.all`) variants of the same size.
RTX_PRO_6000_96GB = tuple(
    sorted(
        (
            MigProfile(f"{base}{variant}", slices, 4, memory)
            for base, slices, memory, variants in (
                ("1g.24gb", 1, 24, ("", "+me", "+gfx", "-me", "+me.all")),
                ("2g.48gb", 2, 48, ("", "+gfx", "-me", "+me.all")),
                ("4g.96gb", 4, 96, ("", "+gfx")),
            )
            for variant in variants
        ),
        key=lambda p: (p.slices, p.memory_gib, p.name),
    )
)

# Matched, first hit wins, against the words of the GPU model as NVML names it ("NVIDIA A100-SXM4-80GB",
# "NVIDIA H100 80GB HBM3", "NVIDIA GH200 480GB"): (product words, any of these words or none, profiles).
# Whole words, so "H200" is not read inside "GH200" nor "B200" inside "GB200".
MODELS: tuple[tuple[frozenset[str], frozenset[str], tuple[MigProfile, ...]], ...] = (
    (frozenset({"A30"}), frozenset(), A30_24GB),
    (frozenset({"A100", "A800"}), frozenset({"80GB"}), A100_80GB),
    (frozenset({"A100", "A800"}), frozenset(), A100_40GB),
    (frozenset({"H100", "H800"}), frozenset({"NVL", "94GB"}), H100_94GB),
    (frozenset({"H100", "H800"}), frozenset({"96GB"}), H100_96GB),
    (frozenset({"H100", "H800"}), frozenset(), H100_80GB),
    (frozenset({"GH200"}), frozenset({"144G", "144GB"}), GH200_144GB),
    (frozenset({"GH200", "H20"}), frozenset(), H100_96GB),
    (frozenset({"H200"}), frozenset(), H200_141GB),
    (frozenset({"B200"}), frozenset(), B200_180GB),
    (frozenset({"GB200"}), frozenset(), GB200_186GB),
    (frozenset({"6000"}), frozenset({"PRO"}), RTX_PRO_6000_96GB),  # not the RTX 6000 Ada: it has no MIG
)
_WORD = re.compile(r"[A-Z0-9]+")


def mig_profiles(gpu_model: str) -> tuple[MigProfile, ...]:
    """The profiles a GPU model offers, smallest first; empty when it is no MIG-capable GPU NVIDIA lists."""
    words = set(_WORD.findall(gpu_model.upper()))
    for products, variants, profiles in MODELS:
        if words & products and (not variants or words & variants):
            return profiles
    return ()


def _by_name() -> dict[str, MigProfile | None]:
    """Every catalogue profile by name; None where two GPUs give one name different shares."""
    out: dict[str, MigProfile | None] = {}
    for _, _, profiles in MODELS:
        for p in profiles:
            known = out.get(p.name, p)
            out[p.name] = p if known is not None and known.fraction == p.fraction else None
    return out


_BY_NAME = _by_name()


# Bounded: model and profile names come from collectors.
@lru_cache(maxsize=4096)
def _lookup(gpu_model: str, name: str, extra: tuple[MigProfile, ...]) -> MigProfile | None:
    own = mig_profiles(gpu_model)
    for p in (*own, *extra):
        if p.name == name:
            return p
    # A GPU the catalogue does not name (an OEM string, a newer board): a profile name that means one share of a
    # GPU everywhere NVIDIA lists it.
    return _BY_NAME.get(name) if not own else None


def mig_profile_find(gpu_model: str, name: str, extra: Sequence[MigProfile] = ()) -> MigProfile | None:
    """The profile `name` on `gpu_model`: one the model offers, or one the deployment adds (`extra`), or for a
    model the catalogue does not list one whose name means the same share on every GPU listed. None: unknown."""
    return _lookup(gpu_model, name, tuple(extra))


class UnknownMigProfile(ValueError):
    pass


UNKNOWN = "unknown MIG profile {name!r} for {model!r}: not in NVIDIA's published profiles nor MIG_EXTRA_PROFILES"


def mig_fraction_of(gpu_model: str, name: str, extra: Sequence[MigProfile] = ()) -> Fraction:
    """The share of a whole GPU a MIG profile holds ('1g.10gb' = 1/7); no profile = the whole GPU."""
    if not name:
        return Fraction(1)
    profile = mig_profile_find(gpu_model, name, extra)
    if profile is None:
        raise UnknownMigProfile(UNKNOWN.format(name=name, model=gpu_model))
    return profile.fraction


def mig_smallest_fit(gpu_model: str, need_gib: float, min_fraction: float = 0.0) -> MigProfile | None:
    """The smallest profile (least compute, then least memory) whose memory holds `need_gib` and whose share of the
    GPU's compute is at least `min_fraction`; variants aside (a media or graphics engine is scarce, and no fit
    advice needs one)."""
    fits = [
        p for p in mig_profiles(gpu_model) if p.memory_gib >= need_gib and p.fraction >= min_fraction and not p.variant
    ]
    return min(fits, key=lambda p: (p.fraction, p.memory_gib), default=None)


_EXTRA = re.compile(r"^(?P<name>[^=\s]+)=(?P<slices>\d+)/(?P<total>\d+):(?P<memory>\d+)$")
EXTRA_RULE = "each entry is name=slices/total:memory_gib with 0 < slices <= total, e.g. 1g.24gb=1/4:24"


def mig_extra_parse(text: str) -> tuple[MigProfile, ...]:
    """Profiles a deployment adds: 'name=slices/total:mem_gib' pairs, comma-separated. ValueError names the
    entry that breaks the rule."""
    out = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        match = _EXTRA.match(entry)
        if not match or not 0 < int(match["slices"]) <= int(match["total"]):
            raise ValueError(f"{entry!r}: {EXTRA_RULE}")
        out.append(MigProfile(match["name"], int(match["slices"]), int(match["total"]), int(match["memory"])))
    return tuple(out)
