//! Without librdmacm (here: `RDMA_DIRECT_LIBRDMACM` pointing nowhere) connecting by address
//! fails naming the Debian package; nothing else in the crate needs the library. One test per
//! process: the library is loaded once.

use rdma_direct::cm;
use rdma_direct::prelude::*;
use std::time::Duration;

#[test]
fn a_missing_librdmacm_names_the_package() {
    std::env::set_var("RDMA_DIRECT_LIBRDMACM", "/nonexistent/librdmacm.so.1");
    let e = cm::Listener::bind("127.0.0.1:7471").unwrap_err();
    assert!(matches!(e, Error::LibraryMissing { .. }), "{e}");
    assert!(
        e.to_string().starts_with(
            "librdmacm.so.1 not found: install rdma-core's librdmacm (Debian/Ubuntu: librdmacm1)"
        ),
        "{e}"
    );
    // The sim still works: only the CM needs the library.
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut cq = dev.create_cq(256).unwrap();
    let mut qp = dev
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    let e = cm::connect(
        &mut dev,
        &mut qp,
        "127.0.0.1:7471",
        &ConnectOpts::default(),
        None,
        Duration::from_secs(1),
    )
    .unwrap_err();
    assert!(e.to_string().contains("librdmacm1"), "{e}");
}
