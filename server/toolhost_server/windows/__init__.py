"""Windows hosts over WinRM: the client (winrm_client), its pinned requests session, PowerShell's CLIXML."""
