"""Personal data, sealed per data subject so that it can be erased while every
proof stays valid (docs/privacy.md): each subject's key (`subject_keys`), and
a value sealed under it (`sealed`)."""
