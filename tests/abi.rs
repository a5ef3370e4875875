//! The hand-written FFI mirrors (`src/core/ffi/types.rs` and `types/`) against the C layout.
//!
//! `fixtures/abi/abi.txt` is printed by `fixtures/abi/abi.c` compiled against rdma-core 44's
//! headers (`fixtures/abi/regen.sh`), one value column per architecture (x86_64, aarch64).
//! Every line of the column of the architecture this test is compiled for must match the Rust
//! value, and every line must be known to this test: a struct, field or constant added to the
//! C program without a Rust counterpart here fails the test, as does a Rust entry the table
//! lacks.

use rdma_direct::ffi::*;
use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};

/// `sizeof T` of a mirror, into `$m` under its `fixtures/abi/abi.txt` key.
macro_rules! size {
    ($m:ident, $t:ident) => {
        $m.insert(format!("sizeof {}", stringify!($t)), size_of::<$t>() as i64);
    };
}
/// `offsetof name` of a mirror's field.
macro_rules! off {
    ($m:ident, $name:literal, $t:ident, $($f:tt)+) => {
        $m.insert(format!("offsetof {}", $name), offset_of!($t, $($f)+) as i64);
    };
}
/// `value C` of a constant.
macro_rules! val {
    ($m:ident, $c:ident) => {
        $m.insert(format!("value {}", stringify!($c)), $c as i64);
    };
}

#[path = "abi/cm.rs"]
mod cm;
#[path = "abi/ext.rs"]
mod ext;
#[path = "abi/verbs.rs"]
mod verbs;

/// Every size, offset and value the Rust mirrors give, keyed as `fixtures/abi/abi.txt`.
fn rust_layout() -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    verbs::layout(&mut m);
    ext::layout(&mut m);
    cm::layout(&mut m);
    m
}

/// `fixtures/abi/abi.txt`: the architectures its first line names, and per key
/// (`<kind> <name>`) one value per architecture.
type CTable = (Vec<String>, BTreeMap<String, Vec<i64>>);

fn c_table() -> Result<CTable, String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/abi/abi.txt");
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    let arches: Vec<String> = match header.as_slice() {
        ["#", "<kind>", "<name>", arches @ ..] if !arches.is_empty() => {
            arches.iter().map(|a| a.to_string()).collect()
        }
        _ => {
            return Err(format!(
                "abi.txt line 1: expected '# <kind> <name> <arch>...': {header:?}"
            ))
        }
    };
    let mut m = BTreeMap::new();
    for (i, line) in lines.enumerate() {
        let n = i + 2;
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [kind, name, values @ ..] = parts.as_slice() else {
            return Err(format!("abi.txt line {n}: empty"));
        };
        if values.len() != arches.len() {
            return Err(format!(
                "abi.txt line {n}: expected '<kind> <name>' and {} values ({}): {line:?}",
                arches.len(),
                arches.join(" ")
            ));
        }
        if !matches!(*kind, "sizeof" | "offsetof" | "value") {
            return Err(format!("abi.txt line {n}: unknown kind {kind:?}"));
        }
        let values = values
            .iter()
            .map(|v| {
                v.parse()
                    .map_err(|_| format!("abi.txt line {n}: bad number {v:?}"))
            })
            .collect::<Result<Vec<i64>, String>>()?;
        if m.insert(format!("{kind} {name}"), values).is_some() {
            return Err(format!("abi.txt line {n}: duplicate {kind} {name}"));
        }
    }
    Ok((arches, m))
}

/// The column of `abi.txt` for the architecture this test is compiled for.
fn c_layout() -> Result<BTreeMap<String, i64>, String> {
    let arch = std::env::consts::ARCH;
    let (arches, table) = c_table()?;
    let Some(col) = arches.iter().position(|a| a == arch) else {
        return Err(format!(
            "abi.txt has no {arch} column (it has {}): add {arch} to fixtures/abi/regen.sh",
            arches.join(", ")
        ));
    };
    Ok(table.into_iter().map(|(k, v)| (k, v[col])).collect())
}

#[test]
fn the_table_has_the_x86_64_and_aarch64_columns_and_they_differ_only_around_the_pthread_mutex() {
    // glibc's pthread_mutex_t is 40 bytes on x86_64 and 48 on aarch64 (pthread_cond_t is 48
    // on both): exactly the structs that embed one, and their fields after it, differ.
    let (arches, table) = c_table().unwrap();
    assert_eq!(arches, ["x86_64", "aarch64"]);
    let differ: Vec<String> = table
        .iter()
        .filter(|(_, v)| v[0] != v[1])
        .map(|(k, v)| format!("{k} {} {}", v[0], v[1]))
        .collect();
    assert_eq!(
        differ,
        [
            "offsetof ibv_context.abi_compat 320 328",
            "offsetof ibv_cq.async_events_completed 124 132",
            "offsetof ibv_cq.comp_events_completed 120 128",
            "offsetof ibv_cq.cond 72 80",
            "offsetof ibv_qp.cond 104 112",
            "offsetof ibv_qp.events_completed 152 160",
            "offsetof ibv_srq.cond 72 80",
            "offsetof ibv_srq.events_completed 120 128",
            "sizeof ibv_context 328 336",
            "sizeof ibv_cq 128 136",
            "sizeof ibv_qp 160 168",
            "sizeof ibv_srq 128 136",
            "sizeof verbs_context 648 656",
        ]
    );
}

#[test]
fn every_line_of_the_c_table_matches_the_rust_mirrors() {
    let c = c_layout().unwrap();
    let rust = rust_layout();
    assert!(c.len() > 300, "abi.txt has only {} lines", c.len());
    let mut errors = Vec::new();
    for (k, cv) in &c {
        match rust.get(k) {
            None => errors.push(format!("{k}: in abi.txt but unknown to tests/abi.rs")),
            Some(rv) if rv != cv => errors.push(format!("{k}: C says {cv}, Rust says {rv}")),
            Some(_) => {}
        }
    }
    for k in rust.keys() {
        if !c.contains_key(k) {
            errors.push(format!(
                "{k}: checked by tests/abi.rs but missing from abi.txt"
            ));
        }
    }
    assert!(errors.is_empty(), "ABI mismatches:\n{}", errors.join("\n"));
}

#[test]
fn the_mlx5dv_context_tail_covers_the_whole_struct() {
    // We mirror only the head of mlx5dv_context; the opaque tail must make the Rust struct
    // exactly as large as C's, or mlx5dv_query_device would write past it.
    let c = c_layout().unwrap();
    assert_eq!(
        c["sizeof mlx5dv_context"],
        size_of::<mlx5dv_context>() as i64
    );
    assert_eq!(MLX5DV_CONTEXT_SIZE, size_of::<mlx5dv_context>());
}

/// A `verbs_context` built in memory, with provenance over the whole struct, and a pointer to
/// its embedded `ibv_context` derived from it (as libibverbs' own allocation gives).
fn fake_ctx(v: &mut verbs_context) -> *mut ibv_context {
    let base: *mut verbs_context = v;
    // SAFETY: `base` points to a live, exclusively borrowed verbs_context.
    unsafe { std::ptr::addr_of_mut!((*base).context) }
}

unsafe extern "C" fn fake_alloc_td(
    _ctx: *mut ibv_context,
    _attr: *mut ibv_td_init_attr,
) -> *mut ibv_td {
    std::ptr::null_mut()
}

#[test]
fn verbs_get_ctx_is_container_of_and_checks_abi_compat() {
    let mut v = verbs_context::zeroed();
    let base = std::ptr::addr_of_mut!(v) as usize;
    let ctx = fake_ctx(&mut v);
    // abi_compat 0: a legacy context, no extended ops.
    // SAFETY: `ctx` is embedded in `v` with provenance over all of `v`.
    assert!(unsafe { verbs_get_ctx(ctx) }.is_none());
    v.context.abi_compat = VERBS_ABI_IS_EXTENDED as *mut libc::c_void;
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    let got = unsafe { verbs_get_ctx(ctx) }.expect("extended context");
    assert_eq!(got as usize, base);
    assert_eq!(ctx as usize - base, 320);
}

#[test]
fn verbs_get_ctx_op_mirrors_the_sz_check() {
    let off = offset_of!(verbs_context, alloc_td);
    // sizeof verbs_context - offsetof alloc_td, from the C table's column for this
    // architecture: 648 - 128 = 520 on x86_64, 656 - 128 = 528 on aarch64.
    let c = c_layout().unwrap();
    let need = size_of::<verbs_context>() - off;
    assert_eq!(
        need as i64,
        c["sizeof verbs_context"] - c["offsetof verbs_context.alloc_td"]
    );
    assert!(op_in_range(need, off));
    assert!(!op_in_range(need - 1, off));
    assert!(!op_in_range(usize::MAX, size_of::<verbs_context>() + 8));

    let mut v = verbs_context::zeroed();
    v.context.abi_compat = VERBS_ABI_IS_EXTENDED as *mut libc::c_void;
    v.alloc_td = Some(fake_alloc_td);
    let base = std::ptr::addr_of_mut!(v) as usize;

    // sz one byte short of the op's slot: missing, even though the pointer is set.
    v.sz = need - 1;
    let ctx = fake_ctx(&mut v);
    // SAFETY: `ctx` is embedded in `v` with provenance over all of `v`.
    let e = unsafe { verbs_get_ctx_op(ctx, off, "alloc_td") }.unwrap_err();
    assert!(matches!(e, rdma_direct::Error::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("alloc_td"), "{e}");

    // In range and set: found.
    v.sz = need;
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    let got = unsafe { verbs_get_ctx_op(ctx, off, "alloc_td") }.expect("op present");
    assert_eq!(got as usize, base);

    // In range but null: missing.
    v.alloc_td = None;
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    let e = unsafe { verbs_get_ctx_op(ctx, off, "alloc_td") }.unwrap_err();
    assert!(e.to_string().contains("does not implement"), "{e}");

    // Not extended: missing.
    v.alloc_td = Some(fake_alloc_td);
    v.context.abi_compat = std::ptr::null_mut();
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    let e = unsafe { verbs_get_ctx_op(ctx, off, "alloc_td") }.unwrap_err();
    assert!(e.to_string().contains("not an extended"), "{e}");

    // The real provider fills the whole struct: every op this crate uses is reachable.
    v.context.abi_compat = VERBS_ABI_IS_EXTENDED as *mut libc::c_void;
    v.sz = size_of::<verbs_context>();
    for o in [
        offset_of!(verbs_context, alloc_td),
        offset_of!(verbs_context, dealloc_td),
        offset_of!(verbs_context, alloc_parent_domain),
        offset_of!(verbs_context, create_qp_ex),
    ] {
        assert!(op_in_range(v.sz, o));
    }
}

unsafe extern "C" fn fake_alloc_td_eopnotsupp(
    _ctx: *mut ibv_context,
    _attr: *mut ibv_td_init_attr,
) -> *mut ibv_td {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = libc::EOPNOTSUPP };
    std::ptr::null_mut()
}

unsafe extern "C" fn fake_alloc_td_enomem(
    _ctx: *mut ibv_context,
    _attr: *mut ibv_td_init_attr,
) -> *mut ibv_td {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = libc::ENOMEM };
    std::ptr::null_mut()
}

static mut FAKE_TD: ibv_td = ibv_td {
    context: std::ptr::null_mut(),
};

unsafe extern "C" fn fake_alloc_td_ok(
    ctx: *mut ibv_context,
    attr: *mut ibv_td_init_attr,
) -> *mut ibv_td {
    // SAFETY: `attr` points to the caller's live attr; FAKE_TD is only touched by this test.
    unsafe {
        assert_eq!((*attr).comp_mask, 0);
        let td = std::ptr::addr_of_mut!(FAKE_TD);
        (*td).context = ctx;
        td
    }
}

unsafe extern "C" fn fake_dealloc_td(td: *mut ibv_td) -> libc::c_int {
    if td == std::ptr::addr_of_mut!(FAKE_TD) {
        0
    } else {
        libc::EINVAL
    }
}

#[test]
fn alloc_td_calls_the_op_and_maps_the_stub_errno_to_unsupported() {
    let mut v = verbs_context::zeroed();
    v.context.abi_compat = VERBS_ABI_IS_EXTENDED as *mut libc::c_void;
    v.sz = size_of::<verbs_context>();

    // libibverbs' stub for an op the provider lacks fails with EOPNOTSUPP: Unsupported.
    v.alloc_td = Some(fake_alloc_td_eopnotsupp);
    let ctx = fake_ctx(&mut v);
    // SAFETY: `ctx` is embedded in `v` with provenance over all of `v`; the op is ours.
    let e = unsafe { alloc_td(ctx) }.unwrap_err();
    assert!(matches!(e, rdma_direct::Error::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("ibv_alloc_td"), "{e}");

    // Any other errno is a verb error carrying it.
    v.alloc_td = Some(fake_alloc_td_enomem);
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    let e = unsafe { alloc_td(ctx) }.unwrap_err();
    assert!(
        matches!(e, rdma_direct::Error::Verb { verb: "ibv_alloc_td", errno, .. } if errno == libc::ENOMEM),
        "{e}"
    );

    // Success: the op's TD comes back, and dealloc_td reaches the dealloc op.
    v.alloc_td = Some(fake_alloc_td_ok);
    v.dealloc_td = Some(fake_dealloc_td);
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    let td = unsafe { alloc_td(ctx) }.unwrap();
    // SAFETY: `td` is FAKE_TD, written by the op just now.
    assert_eq!(unsafe { (*td).context }, ctx);
    // SAFETY: as above; `td` came from alloc_td on `ctx`.
    assert_eq!(unsafe { dealloc_td(ctx, td) }, 0);

    // No dealloc op (short sz): EOPNOTSUPP, not a call through garbage.
    v.sz = size_of::<verbs_context>() - offset_of!(verbs_context, dealloc_td) - 8;
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    assert_eq!(unsafe { dealloc_td(ctx, td) }, libc::EOPNOTSUPP);
}
