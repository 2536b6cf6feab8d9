"""The listing script windows_list_directory sends, and the quoting that is the only way a path enters it.

helpers.windows_hosts.read_single_quoted reads a PowerShell single-quoted string as PowerShell's tokenizer does,
so the round trips check the literal a real host would read.
"""

from __future__ import annotations

import re

import pytest

from toolhost_server.windows.powershell import (
    MAX_ENTRIES,
    MAX_PATH_CHARS,
    SINGLE_QUOTES,
    UnusablePathError,
    check_path,
    list_directory_script,
    quote_literal,
)

from helpers.windows_hosts import literal_path, read_single_quoted

# Paths an attacker would try, and paths Windows really has: quotes of all five kinds (alone, doubled, at the
# ends), statement separators, subexpressions, variables, backticks, newlines, percent signs, Unicode.
HOSTILE_PATHS = (
    "C:\\",
    "C:\\Users\\O'Brien",
    "C:\\x'; Remove-Item -Recurse C:\\; '",
    "C:\\x\u2019; Stop-Computer; \u2019",
    "C:\\x\u2018; evil; \u2018",
    "C:\\x\u201a; evil; \u201a",
    "C:\\x\u201b; evil; \u201b",
    "C:\\x'\u2019\u2018\u201a\u201b''",
    "C:\\'",
    "C:\\''",
    "C:\\\u2019",
    "C:\\$(Stop-Computer)\\${env:PATH}\\$env:USERNAME",
    "C:\\tab`t`n`0back`'tick`",
    "C:\\a\nb\r\nc'\n; evil\n'",
    "C:\\%PATH%\\%%\\100%",
    "C:\\Программы\\日本語\\😀\\e\u0301",
    "C:\\a;b|c&d>e<f\"g\"",
    "C:\\" + "'" * 500,
)


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_a_quoted_literal_reads_back_as_the_value_it_quotes(path):
    literal = quote_literal(path)
    value, end = read_single_quoted(literal, 0)
    assert value == path
    assert end == len(literal)  # the whole literal is one string: nothing after its closing quote


@pytest.mark.parametrize("quote", SINGLE_QUOTES)
def test_each_of_the_five_single_quotes_is_doubled(quote):
    assert quote_literal(f"a{quote}b") == f"'a{quote}{quote}b'"


def test_only_the_quotes_change_in_a_literal():
    assert quote_literal("C:\\$x`;%\n\u201c\"") == "'C:\\$x`;%\n\u201c\"'"  # double quotes are not single ones


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_the_script_holds_the_path_only_as_the_literal(path):
    script = list_directory_script(path)
    assert literal_path(script) == path
    # Everything but the literal is the same script whatever the path.
    assert script.replace(quote_literal(path), "'C:\\'", 1) == list_directory_script("C:\\")


@pytest.mark.parametrize("path", [
    "\\\\attacker.example\\share", "//attacker.example/share", "\\\\?\\UNC\\attacker.example\\share",
    "\\\\.\\pipe\\x", "\\\\10.9.9.9\\c$", "\\\\attacker.example@SSL@443\\DavWWWRoot",
    "Microsoft.PowerShell.Core\\FileSystem::\\\\attacker.example\\share", "FileSystem::C:\\", "C:\\x::y",
    "C:", "C:Users", "Users", "\\Windows", "HKLM:\\SOFTWARE", "Env:\\",
])
def test_only_a_path_on_a_drive_of_the_host_is_listed(path):
    # A UNC, device or provider path would make the host connect where the caller says, with the logon of the
    # call's credential (finding 1 of the issue 22 review): refused before any script is made.
    with pytest.raises(UnusablePathError, match="drive letter"):
        list_directory_script(path)


def test_the_script_is_exactly_this():
    # Each line is there for a reason (powershell.py says which); a change must be deliberate.
    assert list_directory_script("C:\\Users\\O'Brien") == (
        "$ErrorActionPreference = 'Stop'\n"
        "$ProgressPreference = 'SilentlyContinue'\n"
        "Remove-TypeData -TypeName System.Array -ErrorAction SilentlyContinue\n"
        "try {\n"
        "$directory = Get-Item -LiteralPath 'C:\\Users\\O''Brien' -Force\n"
        "if ($directory.PSProvider.Name -ne 'FileSystem' -or -not $directory.PSIsContainer) {\n"
        "[Console]::Error.Write('NotADirectory')\n"
        "exit 3\n"
        "}\n"
        f"$items = @(Get-ChildItem -LiteralPath $directory.PSPath -Force | Select-Object -First {MAX_ENTRIES + 1})\n"
        "$entries = @($items | ForEach-Object {\n"
        "[pscustomobject]@{\n"
        "name = $_.Name\n"
        "type = $(if ($_.PSIsContainer) { 'directory' } else { 'file' })\n"
        "size = $(if ($_.PSIsContainer) { $null } else { [int64]$_.Length })\n"
        "modified = $_.LastWriteTimeUtc.ToString('o')\n"
        "}\n"
        "})\n"
        "$json = ConvertTo-Json -InputObject $entries -Compress -Depth 3\n"
        "[Console]::Out.Write([Convert]::ToBase64String([Text.Encoding]::UTF8.GetBytes($json)))\n"
        "} catch {\n"
        "[Console]::Error.Write($_.Exception.GetType().FullName + \"`n\" + $_.Exception.Message)\n"
        "exit 2\n"
        "}\n")


def test_a_path_that_looks_like_the_templates_markers_stays_a_path():
    script = list_directory_script("C:\\<<ENTRIES>>\\<<PATH>>")
    assert literal_path(script) == "C:\\<<ENTRIES>>\\<<PATH>>"


@pytest.mark.parametrize("path, why", [
    ("", "empty"),
    ("C:\\a\x00b", "U+0000"),
    ("C:\\a\x1b]0;title\x07", "U+001B"),
    ("C:\\a\x7f", "U+007F"),
    ("C:\\a\x85", "U+0085"),
    ("C:\\a\x9b2J", "U+009B"),
    ("C:\\a\ud800", "surrogate"),
    ("C:\\" + "a" * (MAX_PATH_CHARS - 2), f"{MAX_PATH_CHARS + 1} characters"),
])
def test_paths_no_windows_directory_has_are_refused(path, why):
    with pytest.raises(UnusablePathError, match=re.escape(why)):
        list_directory_script(path)


def test_the_longest_path_allowed_stays_far_below_cmd_exes_command_line_limit():
    import base64

    path = "C:\\" + "\u2019" * (MAX_PATH_CHARS - 3)  # every character doubled by the quoting
    check_path(path)
    encoded = base64.b64encode(list_directory_script(path).encode("utf-16-le")).decode()
    # What WinRM hands to cmd.exe, with room for more options than the client sends.
    command_line = "powershell.exe -NoProfile -NonInteractive -ExecutionPolicy Bypass -EncodedCommand " + encoded
    assert len(command_line) <= 8191 - 60
