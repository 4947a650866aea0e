//! Closed model and user populations: a client sends a request, waits for the whole
//! response, thinks, and goes again (or walks its session), until the run stops, its
//! level drops below it, or the budget is spent.

use std::rc::Rc;
use std::time::Duration;

use tokio::sync::watch;

use crate::conns::Connections;
use crate::shared::{Control, Shared};
use crate::user::{follow, UserState, Walker};

pub async fn run_client(id: u32, shared: Rc<Shared>, mut control: watch::Receiver<Control>) {
    let job = &shared.job;
    let mut user = UserState::new(job, u64::from(id), u64::from(id) << 32 | u64::from(std::process::id()));
    let mut walker = job.session.as_ref().map(|session| Walker::new(session, session.repeat));
    let mut connections = Connections::new(&shared);
    // The slot this client is counted under as a user: its current or last request's.
    let mut slot = UserSlot::default();
    let mut kept_target: Option<usize> = None;
    while control.borrow().runs(id) {
        let (request, think_after) = match &mut walker {
            Some(walker) => match walker.next(&mut user) {
                Some(step) => (step.request, Some(step.think_after)),
                None => {
                    shared.retire(id);
                    break;
                }
            },
            None => (job.request_choice.pick(&mut user.rng), None),
        };
        if user.starved {
            shared.out_of_rows(slot.0.unwrap_or_default());
            shared.retire(id);
            break;
        }
        if !shared.take_ticket() {
            break;
        }
        // A client walking a session keeps the target it picked first (one connection, as a
        // browser keeps its server); a client of the request mix picks one per request.
        let target = match (&walker, kept_target) {
            (Some(_), Some(target)) => target,
            _ => job.target_choice.pick(&mut user.rng),
        };
        kept_target = Some(target);
        let at = slot.moves_to(&shared, target, request);
        let sent = connections.request_for(target, request, None, &mut user).await;
        if !follow(&shared, at, sent.then, &mut user, walker.as_mut()) {
            // Stopped by a plan rule: not started again.
            shared.retire(id);
            break;
        }
        // Without a session, the think time in force now (ramps and adjust change it).
        let pause = think_after.unwrap_or_else(|| control.borrow().think).sample(&mut user.rng);
        think(pause, &mut control, id).await;
    }
    connections.close_all();
    slot.leaves(&shared);
}

/// Where a client is counted as a user: nowhere before its first request, then under the
/// slot of its current or last request until it stops.
#[derive(Default)]
struct UserSlot(Option<usize>);

impl UserSlot {
    /// Returns the slot.
    fn moves_to(&mut self, shared: &Shared, target: usize, request: usize) -> usize {
        let mut stats = shared.stats.borrow_mut();
        let slot = stats.slot(target, shared.job.requests[request].name);
        match self.0 {
            None => stats.user_enters(slot),
            Some(from) => stats.user_moves(from, slot),
        }
        self.0 = Some(slot);
        slot
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
