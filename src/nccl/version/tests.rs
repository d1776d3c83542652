use super::*;

#[test]
fn every_version_loads() {
    for m in SUPPORTED_MINORS {
        let v = NcclVersion::parse(&format!("2.{m}")).unwrap();
        let d = VersionData::load(&v).unwrap_or_else(|e| panic!("2.{m}: {e:#}"));
        assert_eq!(d.version, format!("2.{m}"));
    }
}
