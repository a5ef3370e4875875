//! The runner's unit tests: the hex window of a byte diff, every differing range, edits
//! copying from the initial image.

use super::diff::{apply_edit_from, diff_ranges, hex_window};
use crate::scenario::{Edit, EditKind, Range};

#[test]
fn hex_window_marks_the_byte() {
    let b: Vec<u8> = (0..40).collect();
    assert_eq!(
        hex_window(&b, 17, 18),
        "0x000008: 08 09 0a 0b 0c 0d 0e 0f 10 [11] 12 13 14 15 16 17 18 19"
    );
    assert_eq!(
        hex_window(&b, 9, 11),
        "0x000000: 00 01 02 03 04 05 06 07 08 [09] [0a] 0b 0c 0d 0e 0f 10 11 12"
    );
    assert_eq!(hex_window(&b[..3], 0, 1), "0x000000: [00] 01 02");
}

#[test]
fn every_differing_range_is_found() {
    let want = [0u8; 12];
    let mut got = want;
    got[1] = 1;
    got[2] = 1;
    got[5] = 9;
    got[11] = 3;
    let mut care = [true; 12];
    care[5] = false; // an `any` byte
    assert_eq!(
        diff_ranges(&got, &want, &care),
        (11, vec![(1, 3), (11, 12)])
    );
}

#[test]
fn edits_copy_from_the_initial_image() {
    let mut imgs = vec![vec![1u8, 2, 3, 4], vec![0u8; 4]];
    let src = imgs.clone();
    let e = Edit {
        range: Range {
            buf: 1,
            off: 1,
            len: 2,
        },
        kind: EditKind::Copy(Range {
            buf: 0,
            off: 2,
            len: 2,
        }),
        variant: None,
        line: 1,
    };
    apply_edit_from(&mut imgs, &src, None, &e);
    assert_eq!(imgs[1], vec![0, 3, 4, 0]);
}
