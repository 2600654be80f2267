"""The MIG catalogue (collectors/mig.py): NVIDIA's published profiles, their share of the GPU, lookups by the model
names NVML reports, the deployment's extra profiles. Pure: no database."""

from fractions import Fraction

import pytest

from collectors.mig import (
    UnknownMigProfile,
    mig_extra_parse,
    mig_fraction_of,
    mig_profile_find,
    mig_profiles,
    mig_smallest_fit,
)


def names(model: str) -> list[str]:
    return [p.name for p in mig_profiles(model)]


def test_it_lists_each_gpus_published_profiles_smallest_first():
    assert names("NVIDIA A30") == ["1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"]
    assert names("NVIDIA A100-SXM4-40GB") == ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb",
                                              "7g.40gb"]  # fmt: skip
    assert names("NVIDIA A100 80GB PCIe") == names("NVIDIA A100-SXM4-80GB") == [
        "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
    ]  # fmt: skip
    assert names("NVIDIA H100 80GB HBM3") == names("NVIDIA A100-SXM4-80GB")
    assert names("NVIDIA H100 NVL")[-1] == "7g.94gb"
    assert names("NVIDIA H200") == ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]
    assert names("NVIDIA B200")[-1] == "7g.180gb"
    assert names("NVIDIA GB200")[-1] == "7g.186gb"
    assert names("NVIDIA RTX PRO 6000 Blackwell Server Edition")[:3] == ["1g.24gb", "1g.24gb+gfx", "1g.24gb+me"]
    assert names("NVIDIA GeForce RTX 4090") == names("NVIDIA RTX 6000 Ada Generation") == []


def test_it_reads_whole_words_so_a_grace_hopper_is_not_an_h200_nor_a_gb200_a_b200():
    assert names("NVIDIA GH200 480GB")[-1] == "7g.96gb"
    assert names("NVIDIA GH200 144G HBM3e")[-1] == "7g.144gb"
    assert names("NVIDIA GB200")[0] == "1g.23gb" and "1g.47gb" in names("NVIDIA GB200")
    assert "1g.45gb" in names("NVIDIA B200") and "1g.47gb" not in names("NVIDIA B200")
    assert names("NVIDIA H20")[-1] == "7g.96gb"


def test_a_profile_is_priced_by_its_share_of_the_compute_slices():
    assert mig_fraction_of("NVIDIA H100 80GB HBM3", "1g.10gb") == Fraction(1, 7)
    assert mig_fraction_of("NVIDIA H100 80GB HBM3", "1g.20gb") == Fraction(1, 7)
    assert mig_fraction_of("NVIDIA A100-SXM4-40GB", "3g.20gb") == Fraction(3, 7)
    assert mig_fraction_of("NVIDIA A30", "2g.12gb") == Fraction(1, 2)
    assert mig_fraction_of("NVIDIA A30", "4g.24gb") == 1
    assert mig_fraction_of("NVIDIA B200", "7g.180gb") == 1
    assert mig_fraction_of("NVIDIA RTX PRO 6000 Blackwell Server Edition", "1g.24gb-me") == Fraction(1, 4)
    assert mig_fraction_of("NVIDIA H100 80GB HBM3", "") == 1


def test_a_media_extension_holds_what_its_base_profile_holds():
    base, media = mig_profile_find("NVIDIA H200", "1g.18gb"), mig_profile_find("NVIDIA H200", "1g.18gb+me")
    assert base is not None and media is not None
    assert (media.fraction, media.memory_gib) == (base.fraction, base.memory_gib) == (Fraction(1, 7), 18)


def test_memory_is_what_the_name_states():
    assert mig_profile_find("NVIDIA A100-SXM4-40GB", "4g.20gb").memory_gib == 20
    assert mig_profile_find("NVIDIA GB200", "3g.93gb").memory_gib == 93


def test_an_unknown_profile_or_one_of_another_gpu_is_unknown():
    assert mig_profile_find("NVIDIA H100 80GB HBM3", "zz") is None
    assert mig_profile_find("NVIDIA H100 80GB HBM3", "1g.5gb") is None  # an A100 40GB profile
    assert mig_profile_find("NVIDIA A30", "7g.80gb") is None
    with pytest.raises(UnknownMigProfile, match="'zz' for 'NVIDIA H100 80GB HBM3'"):
        mig_fraction_of("NVIDIA H100 80GB HBM3", "zz")


def test_a_model_the_catalogue_does_not_name_takes_a_profile_that_means_one_share_everywhere():
    assert mig_profile_find("Some OEM board", "3g.40gb").fraction == Fraction(3, 7)
    assert mig_profile_find("Some OEM board", "2g.12gb").fraction == Fraction(1, 2)
    assert mig_profile_find("Some OEM board", "zz") is None
    # A quarter of an RTX PRO 6000, a seventh of an H100 NVL: a name that means two shares is not guessed.
    assert mig_profile_find("Some OEM board", "1g.24gb") is None


def test_the_deployment_adds_profiles_by_setting_and_they_win_over_a_guess_by_name():
    extra = mig_extra_parse("1g.24gb=1/2:24, 2g.48gb=2/2:48")
    rtx_pro_5000 = "NVIDIA RTX PRO 5000 Blackwell"

    assert [(p.name, p.fraction, p.memory_gib) for p in extra] == [("1g.24gb", Fraction(1, 2), 24),
                                                                   ("2g.48gb", Fraction(1), 48)]  # fmt: skip
    assert mig_profile_find(rtx_pro_5000, "1g.24gb") is None
    assert mig_fraction_of(rtx_pro_5000, "1g.24gb", extra) == Fraction(1, 2)
    assert mig_fraction_of(rtx_pro_5000, "2g.48gb", extra) == 1
    assert mig_extra_parse("") == ()


@pytest.mark.parametrize("text", ["1g.24gb", "1g.24gb=5/4:24", "1g.24gb=0/4:24", "x=1/4", "x=a/4:1"])
def test_an_extra_profile_that_breaks_the_rule_is_named(text):
    with pytest.raises(ValueError, match="name=slices/total:memory_gib"):
        mig_extra_parse(text)


def test_the_smallest_fit_prefers_less_compute_then_less_memory_and_no_variant():
    assert mig_smallest_fit("NVIDIA H200", 10).name == "1g.18gb"
    assert mig_smallest_fit("NVIDIA H200", 20).name == "1g.35gb"
    assert mig_smallest_fit("NVIDIA H200", 40).name == "3g.71gb"
    assert mig_smallest_fit("NVIDIA A30", 10).name == "2g.12gb"
    assert mig_smallest_fit("NVIDIA RTX PRO 6000 Blackwell Server Edition", 10).name == "1g.24gb"
    assert mig_smallest_fit("NVIDIA H200", 150) is None
