//! Closed model and user populations: a client sends a request, waits for the whole
//! response, thinks, and goes again (or walks its session), until the run stops, its
//! level drops below it, or the budget is spent.

use std::rc::Rc;
use std::time::Duration;

use tokio::sync::watch;

use crate::conns::Connections;
use crate::rng::Rng;
use crate::shared::{Control, Shared};

pub async fn run_client(id: u32, shared: Rc<Shared>, mut control: watch::Receiver<Control>) {
    let job = &shared.job;
    let mut rng = Rng::new(u64::from(id) << 32 | u64::from(std::process::id()));
    let mut connections = Connections::new(&shared);
    let mut rounds = 0;
    // The slot this client is counted under as a user: its current or last request's.
    let mut user = UserSlot::default();
    'client: while control.borrow().runs(id) {
        match &job.session {
            Some(session) => {
                for step in &session.steps {
                    if !control.borrow().runs(id) || !shared.take_ticket() {
                        break 'client;
                    }
                    let target = job.target_choice.pick(&mut rng);
                    user.moves_to(&shared, target, step.request);
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
                user.moves_to(&shared, target, request);
                connections.request(target, request, None).await;
                let pause = control.borrow().think.sample(&mut rng);
                think(pause, &mut control, id).await;
            }
        }
    }
    connections.close_all();
    user.leaves(&shared);
}

/// Where a client is counted as a user: nowhere before its first request, then under the
/// slot of its current or last request until it stops.
#[derive(Default)]
struct UserSlot(Option<usize>);

impl UserSlot {
    fn moves_to(&mut self, shared: &Shared, target: usize, request: usize) {
        let mut stats = shared.stats.borrow_mut();
        let slot = stats.slot(target, shared.job.requests[request].name);
        match self.0 {
            None => stats.user_enters(slot),
            Some(from) => stats.user_moves(from, slot),
        }
        self.0 = Some(slot);
    }

    fn leaves(&mut self, shared: &Shared) {
        if let Some(slot) = self.0.take() {
            shared.stats.borrow_mut().user_leaves(slot);
        }
    }
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
