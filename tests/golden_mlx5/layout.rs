//! `layout.txt`: every struct size, field offset and constant the header defines, against the
//! Rust views' accessors, enums and named constants.

use super::*;

/// Reads a field through the Rust accessor, widened to u128.
type Getter = fn(&[u8]) -> u128;

fn getter(structure: &str, member: &str) -> Option<Getter> {
    let g: Getter = match (structure, member) {
        ("mlx5_wqe_ctrl_seg", "opmod_idx_opcode") => |b| {
            let c = CtrlSeg::new_unchecked(b);
            (u128::from(c.opmod()) << 24)
                | (u128::from(c.wqe_idx()) << 8)
                | u128::from(u8::from(c.opcode()))
        },
        ("mlx5_wqe_ctrl_seg", "qpn_ds") => |b| {
            let c = CtrlSeg::new_unchecked(b);
            (u128::from(c.qpn()) << 8) | u128::from(c.ds())
        },
        ("mlx5_wqe_ctrl_seg", "signature") => |b| CtrlSeg::new_unchecked(b).signature().into(),
        ("mlx5_wqe_ctrl_seg", "dci_stream_channel_id") => {
            |b| CtrlSeg::new_unchecked(b).dci_stream_channel_id().into()
        }
        ("mlx5_wqe_ctrl_seg", "fm_ce_se") => |b| CtrlSeg::new_unchecked(b).fm_ce_se().into(),
        ("mlx5_wqe_ctrl_seg", "imm") => |b| CtrlSeg::new_unchecked(b).imm().into(),
        ("mlx5_wqe_raddr_seg", "raddr") => |b| RaddrSeg::new_unchecked(b).raddr().into(),
        ("mlx5_wqe_raddr_seg", "rkey") => |b| RaddrSeg::new_unchecked(b).rkey().into(),
        ("mlx5_wqe_raddr_seg", "reserved") => |b| RaddrSeg::new_unchecked(b).reserved().into(),
        ("mlx5_wqe_data_seg", "byte_count") => |b| DataSeg::new_unchecked(b).byte_count().into(),
        ("mlx5_wqe_data_seg", "lkey") => |b| DataSeg::new_unchecked(b).lkey().into(),
        ("mlx5_wqe_data_seg", "addr") => |b| DataSeg::new_unchecked(b).addr().into(),
        ("mlx5_wqe_inl_data_seg", "byte_count") => {
            |b| InlineSeg::new_unchecked(b).byte_count().into()
        }
        ("mlx5_wqe_atomic_seg", "swap_add") => |b| AtomicSeg::new_unchecked(b).swap_add().into(),
        ("mlx5_wqe_atomic_seg", "compare") => |b| AtomicSeg::new_unchecked(b).compare().into(),
        ("mlx5_wqe_srq_next_seg", "next_wqe_index") => {
            |b| SrqNextSeg::new_unchecked(b).next_wqe_index().into()
        }
        ("mlx5_wqe_srq_next_seg", "signature") => {
            |b| SrqNextSeg::new_unchecked(b).signature().into()
        }
        ("mlx5_wqe_av", "key.qkey.qkey") => |b| DatagramSeg::new_unchecked(b).qkey().into(),
        ("mlx5_wqe_av", "key.dc_key") => |b| DatagramSeg::new_unchecked(b).key().into(),
        ("mlx5_wqe_av", "dqp_dct") => |b| DatagramSeg::new_unchecked(b).dqp_dct().into(),
        ("mlx5_wqe_av", "stat_rate_sl") => |b| DatagramSeg::new_unchecked(b).stat_rate_sl().into(),
        ("mlx5_wqe_av", "fl_mlid") => |b| DatagramSeg::new_unchecked(b).fl_mlid().into(),
        ("mlx5_wqe_av", "rlid") => |b| DatagramSeg::new_unchecked(b).rlid().into(),
        ("mlx5_wqe_av", "reserved0") => |b| {
            // No getter: the bytes clear_reserved zeroes are the field.
            let mut c = b.to_vec();
            DatagramSeg::new_unchecked(&mut c[..]).clear_reserved();
            b.iter()
                .zip(&c)
                .filter(|(x, y)| x != y)
                .fold(0u128, |acc, (x, _)| (acc << 8) | u128::from(*x))
        },
        ("mlx5_wqe_av", "rmac") => |b| be_u128(&DatagramSeg::new_unchecked(b).rmac()),
        ("mlx5_wqe_av", "tclass") => |b| DatagramSeg::new_unchecked(b).tclass().into(),
        ("mlx5_wqe_av", "hop_limit") => |b| DatagramSeg::new_unchecked(b).hop_limit().into(),
        ("mlx5_wqe_av", "grh_gid_fl") => |b| DatagramSeg::new_unchecked(b).grh_gid_fl().into(),
        ("mlx5_wqe_av", "rgid") => |b| be_u128(&DatagramSeg::new_unchecked(b).rgid()),
        ("mlx5_cqe64", "wqe_id") => |b| Cqe64::new_unchecked(b).wqe_id().into(),
        ("mlx5_cqe64", "ml_path") => |b| Cqe64::new_unchecked(b).ml_path().into(),
        ("mlx5_cqe64", "slid") => |b| Cqe64::new_unchecked(b).slid().into(),
        ("mlx5_cqe64", "flags_rqpn") => |b| Cqe64::new_unchecked(b).flags_rqpn().into(),
        ("mlx5_cqe64", "srqn_uidx") => |b| Cqe64::new_unchecked(b).srqn_uidx().into(),
        ("mlx5_cqe64", "imm_inval_pkey") => |b| Cqe64::new_unchecked(b).imm_inval_pkey().into(),
        ("mlx5_cqe64", "byte_cnt") => |b| Cqe64::new_unchecked(b).byte_cnt().into(),
        ("mlx5_cqe64", "timestamp") => |b| Cqe64::new_unchecked(b).timestamp().into(),
        ("mlx5_cqe64", "sop_drop_qpn") => |b| {
            let c = Cqe64::new_unchecked(b);
            (u128::from(c.s_wqe_opcode()) << 24) | u128::from(c.qpn())
        },
        ("mlx5_cqe64", "wqe_counter") => |b| Cqe64::new_unchecked(b).wqe_counter().into(),
        ("mlx5_cqe64", "signature") => |b| Cqe64::new_unchecked(b).signature().into(),
        ("mlx5_cqe64", "op_own") => |b| Cqe64::new_unchecked(b).op_own().into(),
        ("mlx5_err_cqe", "srqn") => |b| ErrCqe::new_unchecked(b).srqn().into(),
        ("mlx5_err_cqe", "vendor_err_synd") => {
            |b| ErrCqe::new_unchecked(b).vendor_err_synd().into()
        }
        ("mlx5_err_cqe", "syndrome") => |b| u8::from(ErrCqe::new_unchecked(b).syndrome()).into(),
        ("mlx5_err_cqe", "s_wqe_opcode_qpn") => |b| {
            let c = ErrCqe::new_unchecked(b);
            (u128::from(c.s_wqe_opcode()) << 24) | u128::from(c.qpn())
        },
        ("mlx5_err_cqe", "wqe_counter") => |b| ErrCqe::new_unchecked(b).wqe_counter().into(),
        ("mlx5_err_cqe", "signature") => |b| ErrCqe::new_unchecked(b).signature().into(),
        ("mlx5_err_cqe", "op_own") => |b| ErrCqe::new_unchecked(b).op_own().into(),
        _ => return None,
    };
    Some(g)
}

fn be_u128(b: &[u8]) -> u128 {
    b.iter().fold(0, |acc, x| (acc << 8) | u128::from(*x))
}

fn rust_size(structure: &str) -> Option<usize> {
    Some(match structure {
        "mlx5_wqe_ctrl_seg" => CtrlSeg::<&[u8]>::LEN,
        "mlx5_wqe_raddr_seg" => RaddrSeg::<&[u8]>::LEN,
        "mlx5_wqe_data_seg" => DataSeg::<&[u8]>::LEN,
        "mlx5_wqe_inl_data_seg" => InlineSeg::<&[u8]>::LEN,
        "mlx5_wqe_atomic_seg" => AtomicSeg::<&[u8]>::LEN,
        "mlx5_wqe_srq_next_seg" => SrqNextSeg::<&[u8]>::LEN,
        "mlx5_wqe_av" => DatagramSeg::<&[u8]>::LEN,
        "mlx5_cqe64" => Cqe64::<&[u8]>::LEN,
        "mlx5_err_cqe" => ErrCqe::<&[u8]>::LEN,
        _ => return None,
    })
}

fn rust_const(name: &str) -> Option<u64> {
    let op = |o: Opcode| u64::from(u8::from(o));
    let cq = |o: CqeOpcode| u64::from(u8::from(o));
    let sy = |s: Syndrome| u64::from(u8::from(s));
    Some(match name {
        "MLX5_OPCODE_NOP" => op(Opcode::Nop),
        "MLX5_OPCODE_RDMA_WRITE" => op(Opcode::RdmaWrite),
        "MLX5_OPCODE_RDMA_WRITE_IMM" => op(Opcode::RdmaWriteImm),
        "MLX5_OPCODE_SEND" => op(Opcode::Send),
        "MLX5_OPCODE_SEND_IMM" => op(Opcode::SendImm),
        "MLX5_OPCODE_RDMA_READ" => op(Opcode::RdmaRead),
        "MLX5_OPCODE_ATOMIC_CS" => op(Opcode::AtomicCs),
        "MLX5_OPCODE_ATOMIC_FA" => op(Opcode::AtomicFa),
        "MLX5_CQE_REQ" => cq(CqeOpcode::Req),
        "MLX5_CQE_RESP_WR_IMM" => cq(CqeOpcode::RespWrImm),
        "MLX5_CQE_RESP_SEND" => cq(CqeOpcode::RespSend),
        "MLX5_CQE_RESP_SEND_IMM" => cq(CqeOpcode::RespSendImm),
        "MLX5_CQE_RESP_SEND_INV" => cq(CqeOpcode::RespSendInv),
        "MLX5_CQE_RESIZE_CQ" => cq(CqeOpcode::ResizeCq),
        "MLX5_CQE_NO_PACKET" => cq(CqeOpcode::NoPacket),
        "MLX5_CQE_SIG_ERR" => cq(CqeOpcode::SigErr),
        "MLX5_CQE_REQ_ERR" => cq(CqeOpcode::ReqErr),
        "MLX5_CQE_RESP_ERR" => cq(CqeOpcode::RespErr),
        "MLX5_CQE_INVALID" => cq(CqeOpcode::Invalid),
        "MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR" => sy(Syndrome::LocLen),
        "MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR" => sy(Syndrome::LocQpOp),
        "MLX5_CQE_SYNDROME_LOCAL_PROT_ERR" => sy(Syndrome::LocProt),
        "MLX5_CQE_SYNDROME_WR_FLUSH_ERR" => sy(Syndrome::WrFlush),
        "MLX5_CQE_SYNDROME_MW_BIND_ERR" => sy(Syndrome::MwBind),
        "MLX5_CQE_SYNDROME_BAD_RESP_ERR" => sy(Syndrome::BadResp),
        "MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR" => sy(Syndrome::LocAccess),
        "MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR" => sy(Syndrome::RemInvReq),
        "MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR" => sy(Syndrome::RemAccess),
        "MLX5_CQE_SYNDROME_REMOTE_OP_ERR" => sy(Syndrome::RemOp),
        "MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR" => sy(Syndrome::RetryExc),
        "MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR" => sy(Syndrome::RnrRetryExc),
        "MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR" => sy(Syndrome::RemAbort),
        // The request-flags map gives each bit alone.
        "MLX5_WQE_CTRL_CQ_UPDATE" => fm_ce_se::of(fm_ce_se::FLAG_SIGNALED).into(),
        "MLX5_WQE_CTRL_SOLICITED" => fm_ce_se::of(fm_ce_se::FLAG_SOLICITED).into(),
        "MLX5_WQE_CTRL_FENCE" => fm_ce_se::of(fm_ce_se::FLAG_FENCE).into(),
        "MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE" => {
            rdma_direct::wire::MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE.into()
        }
        // What the views write for these, not the names (wire_named checks those).
        "MLX5_INVALID_LKEY" => {
            let mut b = [0u8; 16];
            DataSeg::new_unchecked(&mut b).set_terminator();
            DataSeg::new_unchecked(&b).lkey().into()
        }
        "MLX5_EXTENDED_UD_AV" => {
            let mut b = [0u8; MLX5_AV_LEN];
            DatagramSeg::new_unchecked(&mut b).set_dqp_dct(0, true);
            DatagramSeg::new_unchecked(&b).dqp_dct().into()
        }
        "MLX5_INLINE_SEG" => {
            let mut b = [0u8; 4];
            InlineSeg::new_unchecked(&mut b).set_len(0);
            InlineSeg::new_unchecked(&b).byte_count().into()
        }
        "MLX5_SEND_WQE_BB" => {
            // The smallest ring the encoder takes is one WQEBB.
            let fits = |n: usize| {
                emit_send_wqe(&mut vec![0u8; n], &SendWqe::new(Opcode::Nop, 0, 0)).is_ok()
            };
            (1..=4096).find(|&n| fits(n)).unwrap() as u64
        }
        "MLX5_INLINE_SCATTER_32" => rdma_direct::wire::MLX5_INLINE_SCATTER_32.into(),
        "MLX5_INLINE_SCATTER_64" => rdma_direct::wire::MLX5_INLINE_SCATTER_64.into(),
        _ => return None,
    })
}

#[test]
fn layouts_and_constants_match_the_header() {
    let text = fixture("layout.txt");
    let (mut fields, mut sizes, mut consts) = (0, 0, 0);
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[..] {
            ["size", s, n] => {
                let want: usize = n.parse().unwrap();
                let got = rust_size(s).unwrap_or_else(|| panic!("no Rust view for {s}"));
                assert_eq!(got, want, "sizeof {s}");
                sizes += 1;
            }
            ["field", s, m, off, size] => {
                let (off, size): (usize, usize) = (off.parse().unwrap(), size.parse().unwrap());
                let g = getter(s, m).unwrap_or_else(|| panic!("no Rust accessor for {s}.{m}"));
                let len = rust_size(s).unwrap();
                let ones = if size == 16 {
                    u128::MAX
                } else {
                    (1u128 << (8 * size)) - 1
                };
                // Only the field's bytes set: the accessor reads all ones.
                let mut b = vec![0u8; len];
                b[off..off + size].fill(0xff);
                assert_eq!(g(&b), ones, "{s}.{m} at {off}+{size}");
                // Everything but the field's bytes set: the accessor reads zero.
                let mut b = vec![0xffu8; len];
                b[off..off + size].fill(0);
                assert_eq!(g(&b), 0, "{s}.{m} at {off}+{size}");
                fields += 1;
            }
            ["const", name, v] => {
                let want = parse_num(v).unwrap();
                let got = rust_const(name).unwrap_or_else(|| panic!("no Rust value for {name}"));
                assert_eq!(got, want, "{name}");
                consts += 1;
            }
            _ => panic!("layout.txt: cannot read {line:?}"),
        }
    }
    assert_eq!((sizes, fields, consts), (9, 48, 42), "layout.txt entries");
}

/// The named constant of `rdma_direct::wire` with the header's name, as a number.
fn wire_named(name: &str) -> Option<u64> {
    use rdma_direct::wire as w;
    Some(match name {
        "MLX5_OPCODE_NOP" => w::MLX5_OPCODE_NOP.into(),
        "MLX5_OPCODE_RDMA_WRITE" => w::MLX5_OPCODE_RDMA_WRITE.into(),
        "MLX5_OPCODE_RDMA_WRITE_IMM" => w::MLX5_OPCODE_RDMA_WRITE_IMM.into(),
        "MLX5_OPCODE_SEND" => w::MLX5_OPCODE_SEND.into(),
        "MLX5_OPCODE_SEND_IMM" => w::MLX5_OPCODE_SEND_IMM.into(),
        "MLX5_OPCODE_RDMA_READ" => w::MLX5_OPCODE_RDMA_READ.into(),
        "MLX5_OPCODE_ATOMIC_CS" => w::MLX5_OPCODE_ATOMIC_CS.into(),
        "MLX5_OPCODE_ATOMIC_FA" => w::MLX5_OPCODE_ATOMIC_FA.into(),
        "MLX5_CQE_REQ" => w::MLX5_CQE_REQ.into(),
        "MLX5_CQE_RESP_WR_IMM" => w::MLX5_CQE_RESP_WR_IMM.into(),
        "MLX5_CQE_RESP_SEND" => w::MLX5_CQE_RESP_SEND.into(),
        "MLX5_CQE_RESP_SEND_IMM" => w::MLX5_CQE_RESP_SEND_IMM.into(),
        "MLX5_CQE_RESP_SEND_INV" => w::MLX5_CQE_RESP_SEND_INV.into(),
        "MLX5_CQE_RESIZE_CQ" => w::MLX5_CQE_RESIZE_CQ.into(),
        "MLX5_CQE_NO_PACKET" => w::MLX5_CQE_NO_PACKET.into(),
        "MLX5_CQE_SIG_ERR" => w::MLX5_CQE_SIG_ERR.into(),
        "MLX5_CQE_REQ_ERR" => w::MLX5_CQE_REQ_ERR.into(),
        "MLX5_CQE_RESP_ERR" => w::MLX5_CQE_RESP_ERR.into(),
        "MLX5_CQE_INVALID" => w::MLX5_CQE_INVALID.into(),
        "MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR" => w::MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR.into(),
        "MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR" => w::MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR.into(),
        "MLX5_CQE_SYNDROME_LOCAL_PROT_ERR" => w::MLX5_CQE_SYNDROME_LOCAL_PROT_ERR.into(),
        "MLX5_CQE_SYNDROME_WR_FLUSH_ERR" => w::MLX5_CQE_SYNDROME_WR_FLUSH_ERR.into(),
        "MLX5_CQE_SYNDROME_MW_BIND_ERR" => w::MLX5_CQE_SYNDROME_MW_BIND_ERR.into(),
        "MLX5_CQE_SYNDROME_BAD_RESP_ERR" => w::MLX5_CQE_SYNDROME_BAD_RESP_ERR.into(),
        "MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR" => w::MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR.into(),
        "MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR" => {
            w::MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR.into()
        }
        "MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR" => w::MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR.into(),
        "MLX5_CQE_SYNDROME_REMOTE_OP_ERR" => w::MLX5_CQE_SYNDROME_REMOTE_OP_ERR.into(),
        "MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR" => {
            w::MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR.into()
        }
        "MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR" => w::MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR.into(),
        "MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR" => w::MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR.into(),
        "MLX5_WQE_CTRL_CQ_UPDATE" => w::MLX5_WQE_CTRL_CQ_UPDATE.into(),
        "MLX5_WQE_CTRL_SOLICITED" => w::MLX5_WQE_CTRL_SOLICITED.into(),
        "MLX5_WQE_CTRL_FENCE" => w::MLX5_WQE_CTRL_FENCE.into(),
        "MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE" => w::MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE.into(),
        "MLX5_INVALID_LKEY" => w::MLX5_INVALID_LKEY.into(),
        "MLX5_EXTENDED_UD_AV" => w::MLX5_EXTENDED_UD_AV.into(),
        "MLX5_INLINE_SEG" => w::MLX5_INLINE_SEG.into(),
        "MLX5_SEND_WQE_BB" => w::MLX5_SEND_WQE_BB as u64,
        "MLX5_INLINE_SCATTER_32" => w::MLX5_INLINE_SCATTER_32.into(),
        "MLX5_INLINE_SCATTER_64" => w::MLX5_INLINE_SCATTER_64.into(),
        _ => return None,
    })
}

/// The `wire::offset` constant of a header field, where the wire layer names one.
fn wire_offset(s: &str, m: &str) -> Option<usize> {
    use rdma_direct::wire::offset::*;
    Some(match (s, m) {
        ("mlx5_wqe_ctrl_seg", "opmod_idx_opcode") => ctrl::OPMOD_IDX_OPCODE,
        ("mlx5_wqe_ctrl_seg", "qpn_ds") => ctrl::QPN_DS,
        ("mlx5_wqe_ctrl_seg", "signature") => ctrl::SIGNATURE,
        ("mlx5_wqe_ctrl_seg", "dci_stream_channel_id") => ctrl::DCI_STREAM_CHANNEL_ID,
        ("mlx5_wqe_ctrl_seg", "fm_ce_se") => ctrl::FM_CE_SE,
        ("mlx5_wqe_ctrl_seg", "imm") => ctrl::IMM,
        ("mlx5_wqe_raddr_seg", "raddr") => raddr::RADDR,
        ("mlx5_wqe_raddr_seg", "rkey") => raddr::RKEY,
        ("mlx5_wqe_raddr_seg", "reserved") => raddr::RESERVED,
        ("mlx5_wqe_data_seg", "byte_count") => data::BYTE_COUNT,
        ("mlx5_wqe_data_seg", "lkey") => data::LKEY,
        ("mlx5_wqe_data_seg", "addr") => data::ADDR,
        ("mlx5_wqe_inl_data_seg", "byte_count") => inline::BYTE_COUNT,
        ("mlx5_wqe_atomic_seg", "swap_add") => atomic::SWAP_ADD,
        ("mlx5_wqe_atomic_seg", "compare") => atomic::COMPARE,
        ("mlx5_wqe_srq_next_seg", "next_wqe_index") => srq_next::NEXT_WQE_INDEX,
        ("mlx5_wqe_srq_next_seg", "signature") => srq_next::SIGNATURE,
        ("mlx5_wqe_av", "key.qkey.qkey") => av::QKEY,
        ("mlx5_wqe_av", "key.dc_key") => av::KEY,
        ("mlx5_wqe_av", "dqp_dct") => av::DQP_DCT,
        ("mlx5_wqe_av", "stat_rate_sl") => av::STAT_RATE_SL,
        ("mlx5_wqe_av", "fl_mlid") => av::FL_MLID,
        ("mlx5_wqe_av", "rlid") => av::RLID,
        ("mlx5_wqe_av", "reserved0") => av::RESERVED0,
        ("mlx5_wqe_av", "rmac") => av::RMAC,
        ("mlx5_wqe_av", "tclass") => av::TCLASS,
        ("mlx5_wqe_av", "hop_limit") => av::HOP_LIMIT,
        ("mlx5_wqe_av", "grh_gid_fl") => av::GRH_GID_FL,
        ("mlx5_wqe_av", "rgid") => av::RGID,
        ("mlx5_cqe64", "wqe_id") => cqe64::WQE_ID,
        ("mlx5_cqe64", "ml_path") => cqe64::ML_PATH,
        ("mlx5_cqe64", "slid") => cqe64::SLID,
        ("mlx5_cqe64", "flags_rqpn") => cqe64::FLAGS_RQPN,
        ("mlx5_cqe64", "srqn_uidx") => cqe64::SRQN_UIDX,
        ("mlx5_cqe64", "imm_inval_pkey") => cqe64::IMM_INVAL_PKEY,
        ("mlx5_cqe64", "byte_cnt") => cqe64::BYTE_CNT,
        ("mlx5_cqe64", "timestamp") => cqe64::TIMESTAMP,
        ("mlx5_cqe64", "sop_drop_qpn") => cqe64::SOP_DROP_QPN,
        ("mlx5_cqe64", "wqe_counter") => cqe64::WQE_COUNTER,
        ("mlx5_cqe64", "signature") => cqe64::SIGNATURE,
        ("mlx5_cqe64", "op_own") => cqe64::OP_OWN,
        ("mlx5_err_cqe", "srqn") => err_cqe::SRQN,
        ("mlx5_err_cqe", "vendor_err_synd") => err_cqe::VENDOR_ERR_SYND,
        ("mlx5_err_cqe", "syndrome") => err_cqe::SYNDROME,
        ("mlx5_err_cqe", "s_wqe_opcode_qpn") => err_cqe::S_WQE_OPCODE_QPN,
        // The error CQE's tail is the CQE's tail.
        ("mlx5_err_cqe", "wqe_counter") => cqe64::WQE_COUNTER,
        ("mlx5_err_cqe", "signature") => cqe64::SIGNATURE,
        ("mlx5_err_cqe", "op_own") => cqe64::OP_OWN,
        _ => return None,
    })
}

#[test]
fn named_constants_and_offsets_match_the_header() {
    let text = fixture("layout.txt");
    let (mut offsets, mut consts) = (0, 0);
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[..] {
            ["field", s, m, off, _] => {
                // Every field the header has is in the wire layer's one table of offsets,
                // which the views derive their byte ranges from.
                let got =
                    wire_offset(s, m).unwrap_or_else(|| panic!("no wire::offset for {s}.{m}"));
                assert_eq!(got, off.parse::<usize>().unwrap(), "offset of {s}.{m}");
                offsets += 1;
            }
            ["const", name, v] => {
                let got = wire_named(name).unwrap_or_else(|| panic!("no wire::{name}"));
                assert_eq!(got, parse_num(v).unwrap(), "{name}");
                consts += 1;
            }
            _ => {}
        }
    }
    assert_eq!((offsets, consts), (48, 42), "layout.txt entries checked");
}
