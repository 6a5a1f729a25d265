"""The auditor's export bundle: writing it, reading it, verifying it offline."""
