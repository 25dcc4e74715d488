//! The toolcage binary that `cargo build`, `cargo install --path .`, the
//! tests and the benchmarks use is a static-pie executable (see
//! .cargo/config.toml): position independent (ASLR), and no program
//! interpreter (no dynamic loader at start-up).

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn toolcage_is_static_pie() {
    let elf = std::fs::read(env!("CARGO_BIN_EXE_toolcage")).unwrap();
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    assert_eq!(&elf[..4], b"\x7fELF");
    assert_eq!(elf[4], 2, "a 64-bit ELF file");
    const ET_DYN: u16 = 3;
    assert_eq!(u16_at(16), ET_DYN, "position independent (ASLR)");
    const PT_INTERP: u32 = 3;
    let (phoff, phentsize, phnum) = (u64_at(32) as usize, u16_at(54) as usize, u16_at(56));
    let interp = (0..phnum as usize).any(|i| u32_at(phoff + i * phentsize) == PT_INTERP);
    assert!(
        !interp,
        "toolcage is dynamically linked: .cargo/config.toml's rustflags did not apply \
         (a RUSTFLAGS variable replaces them; unset it, or add -C target-feature=+crt-static)"
    );
}
