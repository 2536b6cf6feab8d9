"""Windows hosts over WinRM, for windows_list_directory.

- winrm_client: PowerShell over WinRM (run_powershell), on pinned_session's requests session, NTLM replies
  checked by sealed_replies, stderr decoded by clixml.
- connection_plan and credential_hosts: where a credential may go, decided before any connection.
- powershell and directory_listing: the script sent and how its answer is read.
"""
