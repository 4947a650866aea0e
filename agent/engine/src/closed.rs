//! Closed model and user populations: a client sends a request, waits for the whole
//! response, thinks, and goes again (or walks its session), until the run stops, its
//! level drops below it, or the budget is spent.

use std::rc::Rc;
use std::time::Duration;

use tokio::sync::watch;

use crate::conns::Connections;
use crate::rng::Rng;
use crate::run::{Control, Shared};

pub async fn run_client(id: u32, shared: Rc<Shared>, mut control: watch::Receiver<Control>) {
    let job = &shared.job;
    let mut rng = Rng::new(u64::from(id) << 32 | u64::from(std::process::id()));
    let mut connections = Connections::new(&shared);
    let mut rounds = 0;
    'client: while control.borrow().runs(id) {
        match &job.session {
            Some(session) => {
                for step in &session.steps {
                    if !control.borrow().runs(id) || !shared.take_ticket() {
                        break 'client;
                    }
                    let target = job.target_choice.pick(&mut rng);
                    connections.request(target, step.request, None).await;
                    think(step.think_after.sample(&mut rng), &mut control, id).await;
                }
                rounds += 1;
                if session.repeat > 0 && rounds >= session.repeat {
                    shared.retire(id);
                    break;
                }
            }
            None => {
                if !shared.take_ticket() {
                    break;
                }
                let target = job.target_choice.pick(&mut rng);
                let request = job.request_choice.pick(&mut rng);
                connections.request(target, request, None).await;
                let pause = control.borrow().think.sample(&mut rng);
                think(pause, &mut control, id).await;
            }
        }
    }
    connections.close_all();
}

/// Waits `pause`, or less if the client is told to end.
async fn think(pause: Duration, control: &mut watch::Receiver<Control>, id: u32) {
    if !pause.is_zero() {
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = control.wait_for(|c| !c.runs(id)) => {}
        }
    }
}
