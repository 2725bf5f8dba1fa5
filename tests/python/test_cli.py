"""The stax command line: help, version and error behaviour."""
import subprocess


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


def test_version(stax_bin):
    r = run(stax_bin, "version")
    assert r.returncode == 0
    assert r.stdout.startswith("stax ")
    assert r.stdout.strip().split()[1].count(".") == 2


def test_help_lists_commands(stax_bin):
    r = run(stax_bin, "--help")
    assert r.returncode == 0
    assert "usage: stax" in r.stdout


def test_no_arguments_is_usage_error(stax_bin):
    r = run(stax_bin)
    assert r.returncode == 2
    assert "usage: stax" in r.stderr


def test_unknown_command_is_error(stax_bin):
    r = run(stax_bin, "frobnicate")
    assert r.returncode == 2
    assert "unknown command 'frobnicate'" in r.stderr
