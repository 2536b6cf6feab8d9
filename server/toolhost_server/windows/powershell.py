"""The PowerShell that windows_list_directory runs on a Windows host, and the one way a value enters it.

A value reaches a script only through `quote_literal`: a single-quoted string, in which PowerShell gives meaning
to nothing but the quote characters themselves. PowerShell takes FIVE characters as a single quote (' and the
typographic U+2018, U+2019, U+201A, U+201B); doubling only ' would let `C:\\x<U+2019>; evil; <U+2019>` end the
string with a typographic quote. `$`, backticks, `;`, `%`, newlines and `$(...)` are plain characters inside it.

The script goes to powershell.exe as -EncodedCommand (base64 of UTF-16LE), so no byte of it reaches cmd.exe's
parser either; windows/winrm_client.py sends it.
"""

from __future__ import annotations

import re
from typing import Final

# U+0027 and the four typographic single quotes PowerShell treats alike (its CharTraits.IsSingleQuote).
SINGLE_QUOTES: Final = "'\u2018\u2019\u201a\u201b"
_SINGLE_QUOTE: Final = re.compile(f"([{SINGLE_QUOTES}])")

# A Windows path is at most 32,767 UTF-16 units with the \\?\ prefix; a directory to list needs far fewer, and a
# short bound keeps the script under cmd.exe's 8,191-character command line once encoded (base64 of UTF-16LE:
# 1,024 quotes, each doubled, become about 5,500 characters).
MAX_PATH_CHARS: Final = 1024
# C0 controls but tab, CR and LF, DEL, and C1 controls: never in a Windows file name (NTFS refuses 1-31), and
# a terminal or log would obey them when an error quotes the path. Tab and line breaks are allowed: inside a
# single-quoted string they are literal characters, and the tests show they reach PowerShell as such.
_CONTROL: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
# A path on one of the host's drives. A UNC (\\server\share), device (\\?\UNC\..., \\.\pipe) or
# provider-qualified (FileSystem::\\server\share) path would make the Windows host connect where the caller says,
# outside the egress policy and winrm_credential_hosts, as the logon the call's credential made (a basic
# authentication logon keeps the password for onward connections, so the credential's NTLM response would go too).
_DRIVE_PATH: Final = re.compile(r"[A-Za-z]:[\\/]")

DEFAULT_PATH: Final = "C:\\"

# Exit status of the script when PowerShell reported an error: stderr holds the exception's .NET type name, a
# newline, and its message.
SCRIPT_ERROR_EXIT: Final = 2
# Exit status when the path names something other than a directory of the file system (a file, or another
# provider's item such as HKLM:\\SOFTWARE or Env:, which this tool does not list).
NOT_A_DIRECTORY_EXIT: Final = 3
# Entries the script sends at most: one more than the tool returns, so that the tool can tell "exactly the
# limit" from "more"; also what bounds the output a huge directory makes the host send.
MAX_ENTRIES: Final = 10_000

_PATH_MARKER: Final = "<<PATH>>"
_ENTRIES_MARKER: Final = "<<ENTRIES>>"

# Windows PowerShell 5.1 is the baseline:
# - $ProgressPreference: no progress records (CLIXML on stderr) on a successful run.
# - Remove-TypeData System.Array: 5.1's type data would serialise an array as {"value": [...], "Count": n}.
# - @(...) and -InputObject: ConvertTo-Json makes `[]` of an empty array and `[{...}]` of a single entry only
#   when given the array as an argument; through the pipeline it unrolls it ("" and a bare object).
# - ToString('o') on the UTC time: 5.1 serialises a [datetime] as "\/Date(ms)\/".
# - base64 of UTF-8: stdout passes through the console code page, which would turn other characters into '?'.
# - Get-Item first: only a directory of the FileSystem provider is listed, not Env:, Cert: or the registry.
# - `exit 2` with the error on stderr: the caller tells "PowerShell said no" from a transport failure, and the
#   exception's type name says which "no" (ItemNotFoundException, UnauthorizedAccessException) in any language.
# Not indented: the encoded script and a path of MAX_PATH_CHARS quotes (each doubled) together stay within
# cmd.exe's 8,191 characters, through which WinRM starts powershell.exe.
_LIST_DIRECTORY_TEMPLATE: Final = """\
$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'
Remove-TypeData -TypeName System.Array -ErrorAction SilentlyContinue
try {
$directory = Get-Item -LiteralPath <<PATH>> -Force
if ($directory.PSProvider.Name -ne 'FileSystem' -or -not $directory.PSIsContainer) {
[Console]::Error.Write('NotADirectory')
exit 3
}
$items = @(Get-ChildItem -LiteralPath $directory.PSPath -Force | Select-Object -First <<ENTRIES>>)
$entries = @($items | ForEach-Object {
[pscustomobject]@{
name = $_.Name
type = $(if ($_.PSIsContainer) { 'directory' } else { 'file' })
size = $(if ($_.PSIsContainer) { $null } else { [int64]$_.Length })
modified = $_.LastWriteTimeUtc.ToString('o')
}
})
$json = ConvertTo-Json -InputObject $entries -Compress -Depth 3
[Console]::Out.Write([Convert]::ToBase64String([Text.Encoding]::UTF8.GetBytes($json)))
} catch {
[Console]::Error.Write($_.Exception.GetType().FullName + "`n" + $_.Exception.Message)
exit 2
}
"""


class UnusablePathError(ValueError):
    """A path that cannot be listed; the message says why and what is allowed."""


def quote_literal(value: str) -> str:
    """`value` as a PowerShell single-quoted string literal, quotes included: every one of the five single-quote
    characters doubled (PowerShell reads a doubled quote as one of that same character)."""
    return "'" + _SINGLE_QUOTE.sub(r"\1\1", value) + "'"


def check_path(path: str) -> None:
    """Return when `path` may go into a script; else UnusablePathError. Nothing else is filtered: a Windows path
    may hold `;`, `$`, backticks and quotes, and quote_literal makes each a plain character."""
    if not path:
        raise UnusablePathError("the path is empty; give a directory such as C:\\ or C:\\Users")
    if len(path) > MAX_PATH_CHARS:
        raise UnusablePathError(f"the path has {len(path)} characters, more than the {MAX_PATH_CHARS} allowed")
    # `::` anywhere: PowerShell may read what precedes it as a provider name (Provider::path).
    if not _DRIVE_PATH.match(path) or "::" in path:
        raise UnusablePathError(
            "give a directory on one of the host's drives, starting with a drive letter, such as C:\\ or "
            "D:\\data; UNC (\\\\server\\share), device (\\\\?\\, \\\\.\\), provider-qualified (X::) and "
            "relative paths are refused: the host would connect elsewhere with the call's credential")
    control = _CONTROL.search(path)
    if control is not None:
        raise UnusablePathError(
            f"the path holds the control character U+{ord(control.group()):04X} at position {control.start()}, "
            "which no Windows file name holds; remove it")
    if _SURROGATE.search(path):
        raise UnusablePathError("the path holds an unpaired UTF-16 surrogate, which is no character; send the "
                                "path as valid Unicode")


def list_directory_script(path: str) -> str:
    """The script that lists `path` (checked with check_path) and prints the entries as base64 of UTF-8 JSON: a
    list of {name, type, size, modified}, at most MAX_ENTRIES + 1 of them; on an error, exit status
    SCRIPT_ERROR_EXIT (or NOT_A_DIRECTORY_EXIT) and stderr as those constants say."""
    check_path(path)
    # The marker is replaced last, by the literal: nothing in the literal is read as a marker afterwards.
    return (_LIST_DIRECTORY_TEMPLATE.replace(_ENTRIES_MARKER, str(MAX_ENTRIES + 1))
            .replace(_PATH_MARKER, quote_literal(path)))
