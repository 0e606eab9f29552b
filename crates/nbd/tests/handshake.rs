//! The handshake, driven by a raw TCP client: well-formed option haggling and
//! hostile or broken clients.

mod common;

use common::*;
use svs_nbd::protocol::*;
use svs_nbd::NbdConfig;
use tokio::io::AsyncWriteExt;

const MIB: usize = 1024 * 1024;

async fn server_with_vol() -> (TestServer, std::sync::Arc<MemDevice>) {
    let exports = TestExports::new();
    let dev = MemDevice::new(MIB, 0);
    exports.add("vol", dev.clone());
    exports.add("ro", MemDevice::read_only(2 * MIB, 0));
    exports.add("secret", MemDevice::new(MIB, 0));
    exports.forbid("secret");
    (TestServer::start(exports).await, dev)
}

#[tokio::test]
async fn go_answers_export_info_and_block_sizes_then_enters_transmission() {
    let (server, _dev) = server_with_vol().await;
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    let r = info_or_go(&mut s, OPT_GO, "vol", &[INFO_BLOCK_SIZE, INFO_NAME]).await;
    assert_eq!(r.end, REP_ACK);
    assert_eq!(r.size, Some(MIB as u64));
    let flags = r.flags.unwrap();
    assert_eq!(
        flags,
        FLAG_HAS_FLAGS
            | FLAG_SEND_FLUSH
            | FLAG_SEND_FUA
            | FLAG_SEND_TRIM
            | FLAG_SEND_WRITE_ZEROES
            | FLAG_CAN_MULTI_CONN
            | FLAG_SEND_CACHE
            | FLAG_SEND_FAST_ZERO
    );
    assert_eq!(r.block_size, Some((1, 4096, 32 * MIB as u32)));
    assert_eq!(r.name.as_deref(), Some("vol"));
    // In transmission now: a read works.
    assert_eq!(nbd_read(&mut s, 0, 512).await.unwrap(), vec![0u8; 512]);
    disconnect(s).await;
}

#[tokio::test]
async fn the_block_size_maximum_is_max_payload() {
    let exports = TestExports::new();
    exports.add("vol", MemDevice::new(MIB, 0));
    let config = NbdConfig {
        max_payload: 128 * 1024,
        ..NbdConfig::default()
    };
    let server = TestServer::start_with(exports, config).await;
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE).await;
    let r = info_or_go(&mut s, OPT_INFO, "vol", &[INFO_BLOCK_SIZE]).await;
    assert_eq!(r.block_size, Some((1, 4096, 128 * 1024)));
}

#[tokio::test]
async fn a_read_only_export_advertises_read_only() {
    let (server, _dev) = server_with_vol().await;
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    let r = info_or_go(&mut s, OPT_INFO, "ro", &[]).await;
    assert_eq!(r.end, REP_ACK);
    assert_eq!(r.size, Some(2 * MIB as u64));
    assert_ne!(r.flags.unwrap() & FLAG_READ_ONLY, 0);
}

#[tokio::test]
async fn info_does_not_enter_transmission_and_haggling_goes_on() {
    let (server, _dev) = server_with_vol().await;
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    let r = info_or_go(&mut s, OPT_INFO, "vol", &[]).await;
    assert_eq!(r.end, REP_ACK);
    assert_eq!(r.size, Some(MIB as u64));
    // Still haggling: another option is answered as an option.
    let r = info_or_go(&mut s, OPT_INFO, "ro", &[]).await;
    assert_eq!(r.end, REP_ACK);
    let r = info_or_go(&mut s, OPT_GO, "vol", &[]).await;
    assert_eq!(r.end, REP_ACK);
    assert_eq!(nbd_read(&mut s, 0, 4096).await.unwrap().len(), 4096);
    disconnect(s).await;
}

#[tokio::test]
async fn go_for_an_unknown_or_forbidden_export_answers_err_unknown_and_haggling_goes_on() {
    let (server, _dev) = server_with_vol().await;
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    for name in ["nope", "secret", ""] {
        let r = info_or_go(&mut s, OPT_GO, name, &[INFO_BLOCK_SIZE]).await;
        assert_eq!(r.end, REP_ERR_UNKNOWN, "{name}");
        assert_eq!(r.size, None, "no info for {name}");
        let r = info_or_go(&mut s, OPT_INFO, name, &[]).await;
        assert_eq!(r.end, REP_ERR_UNKNOWN, "{name}");
    }
    let r = info_or_go(&mut s, OPT_GO, "vol", &[]).await;
    assert_eq!(r.end, REP_ACK);
    disconnect(s).await;
}

#[tokio::test]
async fn list_answers_one_server_reply_per_visible_export_then_ack() {
    let (server, _dev) = server_with_vol().await;
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE).await;
    send_option(&mut s, OPT_LIST, &[]).await;
    let mut names = Vec::new();
    loop {
        let r = read_option_reply(&mut s).await;
        assert_eq!(r.option, OPT_LIST);
        if r.reply_type == REP_ACK {
            break;
        }
        assert_eq!(r.reply_type, REP_SERVER);
        let len = u32::from_be_bytes(r.data[0..4].try_into().unwrap()) as usize;
        assert_eq!(len, r.data.len() - 4);
        names.push(String::from_utf8(r.data[4..].to_vec()).unwrap());
    }
    assert_eq!(names, ["ro", "vol"]);
    // LIST with data is invalid, and haggling goes on.
    send_option(&mut s, OPT_LIST, b"x").await;
    assert_eq!(read_option_reply(&mut s).await.reply_type, REP_ERR_INVALID);
    let r = info_or_go(&mut s, OPT_GO, "vol", &[]).await;
    assert_eq!(r.end, REP_ACK);
}

#[tokio::test]
async fn unsupported_options_answer_err_unsup_and_haggling_goes_on() {
    let (server, _dev) = server_with_vol().await;
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    for (option, expected) in [
        // Known, but this data is wrong for them (or they come too early:
        // meta contexts need structured replies first).
        (OPT_STRUCTURED_REPLY, REP_ERR_INVALID),
        (OPT_LIST_META_CONTEXT, REP_ERR_INVALID),
        (OPT_SET_META_CONTEXT, REP_ERR_INVALID),
        // Not offered here (no TLS), or not supported at all.
        (OPT_STARTTLS, REP_ERR_UNSUP),
        (OPT_EXTENDED_HEADERS, REP_ERR_UNSUP),
        (OPT_PEEK_EXPORT, REP_ERR_UNSUP),
        (99, REP_ERR_UNSUP),
        (u32::MAX, REP_ERR_UNSUP),
    ] {
        send_option(&mut s, option, b"some data").await;
        let r = read_option_reply(&mut s).await;
        assert_eq!(r.option, option);
        assert_eq!(r.reply_type, expected, "option {option}");
    }
    let r = info_or_go(&mut s, OPT_GO, "vol", &[]).await;
    assert_eq!(r.end, REP_ACK);
    disconnect(s).await;
}

#[tokio::test]
async fn malformed_go_data_answers_err_invalid_and_haggling_goes_on() {
    let (server, _dev) = server_with_vol().await;
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    let mut overlong = go_data("vol", &[]);
    overlong[0..4].copy_from_slice(&1000u32.to_be_bytes());
    let mut bad_count = go_data("vol", &[INFO_NAME]);
    bad_count.truncate(bad_count.len() - 1);
    for data in [
        vec![],
        vec![0, 0, 0],
        overlong,
        bad_count,
        go_data("v\u{0}l", &[]),
    ] {
        send_option(&mut s, OPT_GO, &data).await;
        let r = read_option_reply(&mut s).await;
        assert_eq!(r.reply_type, REP_ERR_INVALID, "{data:?}");
    }
    let r = info_or_go(&mut s, OPT_GO, "vol", &[]).await;
    assert_eq!(r.end, REP_ACK);
}

#[tokio::test]
async fn abort_is_acknowledged_then_the_connection_closes() {
    let (server, _dev) = server_with_vol().await;
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE).await;
    send_option(&mut s, OPT_ABORT, &[]).await;
    let r = read_option_reply(&mut s).await;
    assert_eq!((r.option, r.reply_type), (OPT_ABORT, REP_ACK));
    assert!(is_closed(&mut s).await);
    assert_normal_client_works(server.addr, "vol").await;
}

#[tokio::test]
async fn export_name_replies_with_size_and_flags_padded_unless_no_zeroes() {
    let (server, dev) = server_with_vol().await;
    dev.data.lock().unwrap()[0] = 0x77;
    for no_zeroes in [true, false] {
        let flags = FLAG_C_FIXED_NEWSTYLE | if no_zeroes { FLAG_C_NO_ZEROES } else { 0 };
        let mut s = greet(server.addr, flags).await;
        send_option(&mut s, OPT_EXPORT_NAME, b"vol").await;
        let r = read_n(&mut s, 10).await.unwrap();
        assert_eq!(u64::from_be_bytes(r[0..8].try_into().unwrap()), MIB as u64);
        assert_eq!(
            u16::from_be_bytes([r[8], r[9]]) & FLAG_HAS_FLAGS,
            FLAG_HAS_FLAGS
        );
        if !no_zeroes {
            assert_eq!(read_n(&mut s, 124).await.unwrap(), vec![0u8; 124]);
        }
        // The next bytes are the reply to our first request, not padding.
        assert_eq!(nbd_read(&mut s, 0, 1).await.unwrap(), [0x77]);
        disconnect(s).await;
    }
}

#[tokio::test]
async fn export_name_of_an_unknown_or_forbidden_export_closes_the_connection() {
    let (server, _dev) = server_with_vol().await;
    for name in ["nope", "secret"] {
        let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
        send_option(&mut s, OPT_EXPORT_NAME, name.as_bytes()).await;
        assert!(is_closed(&mut s).await, "{name}");
    }
    // A name that is not UTF-8 too.
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    send_option(&mut s, OPT_EXPORT_NAME, &[0xff, 0xfe]).await;
    assert!(is_closed(&mut s).await);
    assert_normal_client_works(server.addr, "vol").await;
}

#[tokio::test]
async fn unknown_client_flags_close_the_connection() {
    let (server, _dev) = server_with_vol().await;
    for flags in [1u32 << 2, 0xffff_ffff, 1 << 31 | 1] {
        let mut s = greet(server.addr, flags).await;
        assert!(is_closed(&mut s).await, "flags {flags:#x}");
    }
    assert_normal_client_works(server.addr, "vol").await;
}

#[tokio::test]
async fn a_bad_option_magic_closes_the_connection() {
    let (server, _dev) = server_with_vol().await;
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    let mut b = Vec::new();
    b.extend_from_slice(b"NBDMAGIC");
    b.extend_from_slice(&OPT_LIST.to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    s.write_all(&b).await.unwrap();
    assert!(is_closed(&mut s).await);
    assert_normal_client_works(server.addr, "vol").await;
}

#[tokio::test]
async fn a_huge_option_length_closes_the_connection_without_reading_the_data() {
    let (server, _dev) = server_with_vol().await;
    for length in [u32::MAX, MAX_OPTION_DATA + 1] {
        let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
        let mut b = Vec::new();
        b.extend_from_slice(&IHAVEOPT.to_be_bytes());
        b.extend_from_slice(&OPT_GO.to_be_bytes());
        b.extend_from_slice(&length.to_be_bytes());
        s.write_all(&b).await.unwrap();
        // Closed at once, though the announced data never comes.
        assert!(is_closed(&mut s).await, "length {length}");
    }
    assert_normal_client_works(server.addr, "vol").await;
}

#[tokio::test]
async fn a_client_that_vanishes_mid_handshake_does_not_disturb_the_server() {
    let (server, _dev) = server_with_vol().await;
    // Gone after the greeting, and gone halfway through an option header.
    let s = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    drop(s);
    let mut s = greet(server.addr, FLAG_C_FIXED_NEWSTYLE).await;
    s.write_all(&IHAVEOPT.to_be_bytes()[..5]).await.unwrap();
    drop(s);
    assert_normal_client_works(server.addr, "vol").await;
}
