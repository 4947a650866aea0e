<?php
// What every page of the journeys lab app shares: its database, its session and its plain
// responses. targets/journeyapp.py copies these files into the app's state directory and
// writes config.php beside them (the database's address, the session directory, the item
// bound); nginx runs only login.php, account.php and cart.php, so this file and config.php are
// never served.
declare(strict_types=1);

require __DIR__ . '/config.php';

set_exception_handler(function (Throwable $e): void {
    // A database that is down or refuses is the server's failure: 503, and the reason.
    http_response_code(503);
    header('Content-Type: text/plain; charset=utf-8');
    echo 'database error: ', $e->getMessage(), "\n";
});

function jr_db(): mysqli
{
    static $db = null;
    if ($db === null) {
        mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
        // p: a persistent connection per PHP-FPM child; one per request would leave a
        // TIME_WAIT socket each and run out of loopback ports under load (as dbpages.py found).
        $db = new mysqli('p:' . JR_DB_HOST, JR_DB_USER, JR_DB_PASSWORD, JR_DB_NAME, JR_DB_PORT);
    }
    return $db;
}

// The session: files in the lab's own directory (never NFS, never /var/lib/php), a cookie
// PHPSESSID that scripts cannot read, and no session id taken from the client unless this
// server made it (strict mode). A page that only reads closes the session at once, so a
// user's requests do not wait on each other's session lock.
function jr_session(bool $write): void
{
    $options = [
        'name' => 'PHPSESSID',
        'save_path' => JR_SESSION_DIR,
        'use_strict_mode' => true,
        'use_only_cookies' => true,
        'cookie_httponly' => true,
        'cookie_samesite' => 'Lax',
        'cookie_path' => '/',
        // The directory is emptied at every start; no collector runs during a measurement.
        'gc_probability' => 0,
    ];
    if (!$write) {
        $options['read_and_close'] = true;
    }
    session_start($options);
}

// Only these methods; any other is a 405 naming the allowed ones.
function jr_allow(string ...$methods): void
{
    if (!in_array($_SERVER['REQUEST_METHOD'] ?? '', $methods, true)) {
        header('Allow: ' . implode(', ', $methods));
        jr_text(405, 'method not allowed');
    }
}

// A form field as a string ('' if absent or not a single value, e.g. user[]=x).
function jr_field(string $name): string
{
    $value = $_POST[$name] ?? '';
    return is_string($value) ? $value : '';
}

function jr_text(int $status, string $text): never
{
    http_response_code($status);
    header('Content-Type: text/plain; charset=utf-8');
    echo $text, "\n";
    exit;
}

function jr_json(int $status, array $body): never
{
    http_response_code($status);
    header('Content-Type: application/json');
    echo json_encode($body), "\n";
    exit;
}

function jr_redirect(string $path): never
{
    header('Location: ' . $path, true, 302);
    exit;
}

// The account of this name and password: [id, name], or null. Passwords are salted SHA-256,
// not bcrypt: a login should cost what the app does, not a deliberately slow hash that would
// make every load test of this app a test of PHP's CPU.
function jr_check_password(string $name, string $password): ?array
{
    $stmt = jr_db()->prepare('SELECT id, salt, password_sha256 FROM users WHERE name = ?');
    $stmt->bind_param('s', $name);
    $stmt->execute();
    $row = $stmt->get_result()->fetch_row();
    if (!$row || !hash_equals($row[2], hash('sha256', $row[1] . $password))) {
        return null;
    }
    return [(int)$row[0], $name];
}

function jr_cart_count(int $user_id): int
{
    $stmt = jr_db()->prepare('SELECT COUNT(*) FROM cart WHERE user_id = ?');
    $stmt->bind_param('i', $user_id);
    $stmt->execute();
    return (int)$stmt->get_result()->fetch_row()[0];
}
