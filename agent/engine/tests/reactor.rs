//! The engine's reactor (reactor.rs) under a real socket: its timers still fire while a
//! socket keeps it busy. Here rather than in reactor.rs, which the socket module depends on.

use std::cell::Cell;
use std::io::Write;
use std::net::TcpListener;
use std::rc::Rc;
use std::time::{Duration, Instant};

use loadfleet_engine::reactor::Reactor;
use loadfleet_engine::socket::Socket;
use tokio::io::AsyncReadExt;

#[test]
fn timers_fire_while_a_socket_stays_busy() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // A server that writes a little every 100 µs for 1.5 s: the dispatch always finds events.
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let end = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < end {
            stream.write_all(&[b'x'; 64]).unwrap();
            std::thread::sleep(Duration::from_micros(100));
        }
    });
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    tokio::task::LocalSet::new().block_on(&runtime, async {
        let reactor = Reactor::new().unwrap();
        let mut socket = Socket::connect(&reactor, addr, None).unwrap();
        socket.connected().await.unwrap();
        let received = Rc::new(Cell::new(0usize));
        let counted = Rc::clone(&received);
        let reader = tokio::task::spawn_local(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = socket.read(&mut buf).await {
                counted.set(counted.get() + n);
            }
        });
        tokio::time::sleep(Duration::from_millis(200)).await; // the stream is flowing
        let before = received.get();
        let asked = Instant::now();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let slept = asked.elapsed();
        assert!(received.get() > before, "the socket was busy meanwhile");
        assert!(slept < Duration::from_millis(600), "a 100 ms timer took {slept:?} beside a busy socket");
        reader.await.unwrap();
    });
    server.join().unwrap();
}
