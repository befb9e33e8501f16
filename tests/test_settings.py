"""The typed configuration: RunConfig and ClassifierSettings validated from one declaration per
setting, the results file's `config` object unchanged, and every command's options generated from
the same declarations (score, sweep and quickstart share choices, defaults and checks)."""

import dataclasses

import click
import pytest

from embeval.cli.main import cli as embeval_command
from embeval.errors import EmbevalError
from embeval.settings import DEVICE, ClassifierSettings, RunConfig, as_config, build, declared

# The `config` objects embeval 0.1.0 wrote for these options (key order included): resume compares
# them and the reports read them, so they must not change.
RECORDED = [
    (
        {},
        {
            "preset": "literature",
            "kfold": 10,
            "classifier": {
                "nhid": 0,
                "optim": "adam",
                "batch_size": 64,
                "tenacity": 5,
                "epoch_size": 4,
                "max_epoch": 200,
                "dropout": 0.0,
            },
            "solver": "senteval",
            "seed": 1111,
            "probing_classifier": "configured",
            "bootstrap": 1000,
        },
    ),
    (
        {
            "preset": "prototype",
            "kfold": 3,
            "classifier": '{"nhid": 20, "dropout": 0, "optim": "sgd,lr=0.1"}',
            "seed": 7,
            "classifiers": "mlp,logreg,mlp",
            "normalize": "tune",
            "bootstrap": 0,
            "baseline_bow_dim": 32,
        },
        {
            "preset": "prototype",
            "kfold": 3,
            "classifier": {
                "nhid": 20,
                "optim": "sgd,lr=0.1",
                "batch_size": 128,
                "tenacity": 3,
                "epoch_size": 2,
                "max_epoch": 200,
                "dropout": 0.0,
            },
            "solver": "senteval",
            "seed": 7,
            "probing_classifier": "both",
            "bootstrap": 0,
            "classifiers": ["mlp", "logreg"],
            "normalize": "tune",
            "baseline_bow_dim": 32,
        },
    ),
]


@pytest.mark.parametrize("options,record", RECORDED)
def test_the_recorded_config_is_unchanged_and_reads_back(options, record):
    config = build(**options)
    assert list(config.to_record().items()) == list(record.items())
    assert type(config.to_record()["classifier"]["dropout"]) is float
    assert RunConfig.from_record(record) == config
    assert as_config(record) == config and as_config(config) is config and as_config(None) == build()


def test_a_config_is_frozen_and_valid_wherever_it_is_made():
    config = build()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.kfold = 3
    with pytest.raises(EmbevalError, match="--kfold: must be an integer >= 2, got 1"):
        dataclasses.replace(config, kfold=1)
    with pytest.raises(EmbevalError, match="classifier setting batch_size must be an integer >= 1, got 0"):
        config.with_classifier(batch_size=0)
    with pytest.raises(EmbevalError, match="--classifier: optim: unknown optimizer 'nadam'"):
        ClassifierSettings(optim="nadam")
    assert config.with_classifier(nhid=50).classifier.nhid == 50 and config.classifier.nhid == 0


@pytest.mark.parametrize(
    "options,message",
    [
        ({"kfold": True}, "--kfold: must be an integer >= 2, got True"),
        ({"bootstrap": 50}, "--bootstrap: must be 0 or an integer >= 100, got 50"),
        ({"seed": 1.5}, "--seed: must be an integer >= 0, got 1.5"),
        ({"normalize": "minmax"}, "--normalize: unknown choice 'minmax'; use none, l2, zscore, zscore+l2, tune"),
        ({"solver": "newton"}, "--solver: unknown choice 'newton'; use senteval, lbfgs"),
        ({"preset": "fast"}, "--config: unknown configuration 'fast'; use literature or prototype"),
        ({"classifier": {"dropout": 1}}, "--classifier: classifier setting dropout must be a number in [0, 1), got 1"),
        ({"classifier": {"depth": 2}}, "--classifier: unknown classifier setting depth; settings are nhid, optim"),
        ({"classifier": "[1]"}, "--classifier: must be a JSON object"),
        ({"baseline_bow_dim": 0}, "--baseline-bow-dim: must be an integer >= 1, got 0"),
        ({"probing_classifier": "mlp", "solver": "lbfgs"}, "--probing-classifier: the probing MLP grid needs"),
    ],
)
def test_a_refused_setting_is_one_line_naming_its_option(options, message):
    with pytest.raises(EmbevalError) as err:
        build(**options)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_results_files_config_is_read_with_its_file_named():
    with pytest.raises(EmbevalError, match=r"^r\.json: config: --kfold: must be an integer >= 2, got 0$"):
        RunConfig.from_record({"kfold": 0}, source="r.json")
    with pytest.raises(EmbevalError, match="unknown setting future_key"):
        RunConfig.from_record({"future_key": 1})
    partial = RunConfig.from_record({"future_key": 1, "classifier": {"nhid": 3, "later": 1}}, partial=True)
    assert partial.classifier.nhid == 3 and partial.kfold == 10


def _option(command, name):
    return next(p for p in command.params if p.name == name)


COMMANDS = {name: embeval_command.commands[name] for name in ("score", "sweep", "quickstart")}


@pytest.mark.parametrize("field", list(declared(RunConfig)))
def test_every_command_takes_a_settings_option_from_its_declaration(field):
    """Each RunConfig field's option has, in every command that offers it, the declared name, choices,
    default (None where the value follows --config or --classifiers) and metavar."""
    setting = declared(RunConfig)[field]
    offered = {name: _option(c, field) for name, c in COMMANDS.items() if any(p.name == field for p in c.params)}
    assert "score" in offered
    for name, option in offered.items():
        assert option.opts == [setting.option], name
        expected = None if setting.from_config or callable(setting.default) else setting.default
        assert option.default == expected, name
        if setting.choices:
            assert isinstance(option.type, click.Choice) and tuple(option.type.choices) == setting.choices, name
        assert option.metavar == setting.metavar, name


def test_the_device_option_is_declared_once():
    for name, command in COMMANDS.items():
        option = _option(command, "device")
        assert option.default == DEVICE.default and tuple(option.type.choices) == DEVICE.choices, name


def test_sweep_and_score_share_the_classifier_options(cli, tmp_path):
    """What `score` refuses, `sweep` refuses with the same line (one declaration, one check)."""
    for args in (["--kfold", "1"], ["--classifier", '{"optim": "sgd"}'], ["--bootstrap", "5"]):
        lines = [cli(command, tmp_path / "v.h5", *args).stderr.strip() for command in ("score", "sweep")]
        assert lines[0] == lines[1] and lines[0].startswith("embeval: error: --"), lines
