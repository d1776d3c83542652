//! sysfs reading under a configurable root.
