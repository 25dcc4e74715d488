//! What real test suites do: write and read back a file in the temp dir.
//! Left in place on purpose: the suite checks that nothing appears outside
//! the project (the sandbox's temp dir is private and vanishes).

use std::fs;

#[test]
fn writes_in_temp_dir() {
    let dir = std::env::temp_dir().join(format!("workload-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("data.txt");
    fs::write(&file, "payload").unwrap();
    assert_eq!(fs::read_to_string(&file).unwrap(), "payload");
}
