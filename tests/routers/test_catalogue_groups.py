"""The report's router names and groups come from the catalogue: a router added there shows up in every table and
group that reads its tags, and no page keeps a list of its own."""
from __future__ import annotations

import textwrap

import pytest

from cr2.core.errors import ConfigError, UnknownNameError
from cr2.config.method import BaselinesSpec
from cr2.routers import catalogue, method_router, reference_router, routers_tagged, short_name, use_catalogues


def test_the_groups_the_page_reads_are_the_catalogues_tags_in_catalogue_order():
    assert routers_tagged("paper") == ("cr2", "knn", "mlp", "embedllm", "llmrank")
    assert routers_tagged("compared") == ("cr2", "mlp", "embedllm", "llmrank", "llmrank-bench")
    assert routers_tagged("paper", kinds=("baseline",)) == ("knn", "mlp", "embedllm", "llmrank")
    assert routers_tagged("paper", "compared") == ("cr2", "mlp", "embedllm", "llmrank")
    assert routers_tagged("compared", kinds=("baseline", "baseline-variant")) == (
        "mlp", "embedllm", "llmrank", "llmrank-bench")


def test_short_names_come_from_the_catalogue_and_an_unlisted_name_shows_itself():
    assert short_name("cr2") == "CR²"
    assert short_name("llmrank-bench") == "LLMRank + benchmark id"
    assert short_name("knn") == "KNN"
    # an entry without `short`, a per-model spelling and a method outside the catalogue keep their ids
    assert short_name("knn-distance") == "knn-distance"
    assert short_name("always-qwen3-1.7b") == "always-qwen3-1.7b"
    assert short_name("full-information") == "full-information"


def test_an_unknown_tag_is_an_error_with_a_suggestion():
    with pytest.raises(UnknownNameError, match="did you mean 'compared'"):
        routers_tagged("comapred")


TOY = """\
toy:
  class: {module}:ToyRouter
  kind: baseline
  learned: true
  predicts_proba: true
  display: "Toy"
  colour: "#000000"
  short: "Toy short"
  tags: [compared]
"""


@pytest.fixture
def extra_catalogue(tmp_path):
    yield tmp_path
    use_catalogues([])


def test_a_router_added_to_a_catalogue_joins_its_groups_and_names(extra_catalogue):
    (extra_catalogue / "toy.py").write_text("class ToyRouter:\n    name = 'toy'\n")
    path = extra_catalogue / "catalogue.yaml"
    path.write_text(TOY.format(module="toy.py"))
    use_catalogues([path])
    assert routers_tagged("compared")[-1] == "toy"
    assert short_name("toy") == "Toy short"
    assert "toy" not in routers_tagged("paper")


def test_tags_must_be_a_list_of_names(extra_catalogue):
    path = extra_catalogue / "catalogue.yaml"
    path.write_text(textwrap.dedent(TOY.format(module="toy.py")).replace("tags: [compared]", "tags: compared"))
    use_catalogues([path])
    with pytest.raises(ConfigError, match="tags must be a list"):
        catalogue()


@pytest.mark.parametrize("helper, name, edit, error", [
    (reference_router, "knn", ("tags: [compared]", "tags: [compared]\n  reference: true"),
     "more than one router is marked reference"),
    (method_router, "cr2", ("kind: baseline", "kind: cr2"), "exactly one router of kind cr2"),
])
def test_the_reference_and_the_method_under_study_are_each_one_catalogue_entry(extra_catalogue, helper, name, edit,
                                                                               error):
    assert helper() == name
    path = extra_catalogue / "catalogue.yaml"
    path.write_text(TOY.format(module="toy.py").replace(*edit))
    use_catalogues([path])
    with pytest.raises(ConfigError, match=error):
        helper()


def test_a_config_fits_the_catalogues_default_group_when_it_names_no_routers():
    # the config layer reads the tag from the file itself (it sits below cr2.routers); the value is part of every
    # config hash, so it must stay the list it always was
    assert BaselinesSpec().routers == list(routers_tagged("default"))
    assert BaselinesSpec().routers == ["always", "knn", "mlp", "embedllm", "llmrank", "llmrank-bench"]
