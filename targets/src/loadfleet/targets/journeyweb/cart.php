<?php
// POST item=N (1 to JR_MAX_ITEM): one row (user, item) added to the logged-in user's cart,
// and the cart's row count as JSON {"items": N}. Not logged in: 401; a bad item: 400.
declare(strict_types=1);

require __DIR__ . '/journey.php';

jr_allow('POST');
jr_session(false);
if (!isset($_SESSION['user_id'])) {
    jr_json(401, ['error' => 'not logged in']);
}
$item = jr_field('item');
if (!ctype_digit($item) || (int)$item < 1 || (int)$item > JR_MAX_ITEM) {
    jr_json(400, ['error' => 'item must be an integer from 1 to ' . JR_MAX_ITEM]);
}
$user_id = $_SESSION['user_id'];
$item = (int)$item;
$stmt = jr_db()->prepare('INSERT INTO cart (user_id, item) VALUES (?, ?)');
$stmt->bind_param('ii', $user_id, $item);
$stmt->execute();
jr_json(200, ['items' => jr_cart_count($user_id)]);
