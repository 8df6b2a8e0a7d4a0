"""The command line's tables: every command and sub-command parsed has a handler, and --launcher's
choices are the launcher registry's (pure: nothing runs)."""
import argparse

from clusterbench.cli import COMMANDS, build_parser
from clusterbench.cli.options import launcher_choices
from clusterbench.launch.mpi import launchers


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_every_command_has_a_module_and_every_sub_command_a_handler():
    parser = build_parser()
    commands = _subcommands(parser)
    assert list(commands) == list(COMMANDS)
    tables = {"cluster": "ACTIONS", "sim-cluster": "ACTIONS", "sweep": "ACTIONS", "results": "ACTIONS",
              "tune": "TARGETS"}
    for name, table in tables.items():
        assert set(_subcommands(commands[name])) == set(getattr(COMMANDS[name], table)), name
    for name, cmd in COMMANDS.items():
        assert callable(cmd.handle) and cmd.NAME == name


def test_run_cluster_is_the_same_handler_as_cluster_run():
    run, cluster = COMMANDS["run"], COMMANDS["cluster"]
    assert run.NOT_BENCHMARKS["cluster"] is cluster.ACTIONS["run"]


def test_launcher_choices_come_from_the_registry():
    served = {launcher.serves for launcher in launchers.REGISTRY.values()}
    assert set(launcher_choices()) == {"auto"} | served
    assert launcher_choices()[0] == "auto"
    # every --launcher option of `run` offers exactly those
    runs = _subcommands(_subcommands(build_parser())["run"])
    offered = [a.choices for sp in runs.values() for a in sp._actions if "--launcher" in a.option_strings]
    assert offered and all(tuple(c) == launcher_choices() for c in offered)


def test_hosts_help_is_one_text():
    from clusterbench.cli.options import HOSTFILE_HELP, HOSTS_HELP

    commands = _subcommands(build_parser())
    parsers = [commands["doctor"], *_subcommands(commands["cluster"]).values(),
               *_subcommands(commands["sweep"]).values()]
    for sp in parsers:
        for a in sp._actions:
            if "--hosts" in a.option_strings:
                assert a.help.startswith(HOSTS_HELP), sp.prog
            if "--hostfile" in a.option_strings:
                assert a.help == HOSTFILE_HELP, sp.prog
