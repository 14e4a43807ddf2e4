!> melissa_trainer: the Fortran binding of the melissa-trainer C client (melissa_trainer.h).
!>
!>     use melissa_trainer
!>     type(mt_client_t) :: client
!>     real(c_float) :: u(nx, ny)
!>     call mt_create(client)
!>     call mt_declare_field(client, "temperature", MT_FLOAT32, shape(u))
!>     call mt_start(client)                   ! or mt_start_mpi (module melissa_trainer_mpi)
!>     do step = 0, steps - 1
!>       ...
!>       call mt_send(client, step, "temperature", u)
!>     end do
!>     call mt_close(client)
!>
!> Column-major: the protocol carries C-ordered (row-major) arrays. `shape` given to
!> mt_declare_field is the Fortran shape of the array as the program sees it,
!> (n1, n2, ..., nk); the module declares the reversed shape (nk, ..., n2, n1), which is
!> the same memory read in C order. A Fortran array a(nx, ny) thus arrives in the
!> trainer as a numpy array of shape (ny, nx) with a(i, j) at [j-1, i-1], and no
!> element is moved or copied. Offsets and counts of parts (mt_declare_part) are in
!> elements of that flattened array, i.e. of the Fortran array in memory order: a rank
!> owning the columns a(:, j0:j1) owns elements [(j0-1)*nx, j1*nx).
!>
!> mt_send is generic: real(c_float), real(c_double), integer(c_int8_t), (c_int16_t),
!> (c_int32_t), (c_int64_t) and logical(c_bool) arrays of any rank (0 to 15: the dummy
!> is assumed-rank, Fortran 2018 / TS 29113), with a time step of any integer kind
!> (default, c_int64_t, ...). The element type is taken from the array's type and
!> kind, the count from its size. The array must be contiguous (a whole array or a
!> contiguous section); anything else is refused with MT_EINVAL, never copied behind the
!> caller's back (a copy would break mt_set_reuse's MT_REUSE_NEXT_SEND). A default
!> `logical` array (4 bytes) matches no specific procedure: use logical(c_bool).
!>
!> The module re-exports melissa_trainer_core (constants, the type, errors),
!> melissa_trainer_setup (create, set, declare, start) and melissa_trainer_predict
!> (mt_predict: the trainer's current model asked for a prediction);
!> melissa_trainer_mpi (a separate library, with MPI) adds mt_start_mpi.
!>
!> Errors: every subroutine that can fail (all but mt_abort) has an optional last
!> argument `ierr` (integer), set to the
!> status (MT_OK = 0 on success, else one of the MT_E* codes; mt_strerror names it,
!> mt_error_message(client) gives the message of the client's last error). When `ierr`
!> is absent, an error writes "melissa_trainer: <procedure>: <message>" to stderr and
!> stops the program with `error stop <status>` (MT_ESIMREFUSED of mt_send: the C
!> library wrote that line when it learnt the refusal; it is not written twice).
module melissa_trainer
  use, intrinsic :: iso_c_binding
  use melissa_trainer_c
  use melissa_trainer_core
  use melissa_trainer_setup
  use melissa_trainer_predict
  implicit none
  private

  public :: MT_OK, MT_EINVAL, MT_EFIELD, MT_EDTYPE, MT_ESHAPE, MT_ESTATE, MT_EENV, &
            MT_ERENDEZVOUS, MT_ETIMEDOUT, MT_EZMQ, MT_ENOMEM, MT_EMPI, MT_EREFUSED, MT_EREPLY, &
            MT_ESIMREFUSED, MT_EUNREACHABLE
  public :: MT_REFUSAL_NONE, MT_REFUSAL_BUSY, MT_REFUSAL_NOT_SERVING, MT_REFUSAL_WRONG_RUN, &
            MT_REFUSAL_BAD_REQUEST, MT_REFUSAL_FAILED
  public :: mt_predict, mt_predict_refusal, mt_set_serve_endpoints
  public :: MT_FLOAT32, MT_FLOAT64, MT_FLOAT16, MT_INT8, MT_INT16, MT_INT32, MT_INT64, &
            MT_UINT8, MT_UINT16, MT_UINT32, MT_UINT64, MT_BOOL
  public :: MT_REUSE_IMMEDIATE, MT_REUSE_NEXT_SEND
  public :: mt_client_t, mt_finish, mt_error_message, mt_strerror, mt_version
  public :: mt_create, mt_set_simulation_id, mt_set_endpoints, mt_set_rendezvous, &
            mt_set_parameter, mt_set_send_timeout, mt_set_close_timeout, mt_set_batching, &
            mt_set_sndhwm, mt_set_reuse, mt_set_rank, mt_declare_field, mt_declare_part, &
            mt_declare_part_count, mt_start, mt_set_disconnected_timeout, &
            mt_set_replay_bytes, mt_set_follow_timeout, mt_set_curve_server_key, &
            mt_set_failed_close_timeout
  public :: mt_send, mt_flush, mt_close, mt_fail, mt_abort, mt_parameter, mt_simulation_id, &
            mt_receivers

  interface mt_send
    module procedure send_f32, send_f64, send_i8, send_i16, send_i32, send_i64, send_bool
  end interface

contains

  ! -- streaming ------------------------------------------------------------------------

  !> The common part of the mt_send specifics: take the time step (an integer of any
  !> kind), refuse a non-contiguous array, then send `count` elements of `dtype`.
  subroutine send_raw(client, time_step, name, dtype, data, count, contiguous, ierr)
    type(mt_client_t), intent(inout) :: client
    class(*), intent(in) :: time_step
    character(len=*), intent(in) :: name
    integer, intent(in) :: dtype
    type(c_ptr), intent(in) :: data
    integer(c_int64_t), intent(in) :: count
    logical, intent(in) :: contiguous
    integer, intent(out), optional :: ierr
    integer(c_int64_t) :: step
    select type (time_step)
    type is (integer(c_int8_t))
      step = time_step
    type is (integer(c_int16_t))
      step = time_step
    type is (integer(c_int32_t))
      step = time_step
    type is (integer(c_int64_t))
      step = time_step
    class default
      call mt_finish(client, MT_EINVAL, 'mt_send', ierr, "field '" // trim(name) // &
                     "': the time step must be an integer")
      return
    end select
    if (step < 0) then
      call mt_finish(client, MT_EINVAL, 'mt_send', ierr, "field '" // trim(name) // &
                     "': the time step must be >= 0")
      return
    end if
    if (.not. contiguous) then
      call mt_finish(client, MT_EINVAL, 'mt_send', ierr, "field '" // trim(name) // &
                     "': mt_send needs a contiguous array (a whole array or a contiguous " &
                     // "section); copy this one first")
      return
    end if
    call mt_finish(client, int(mt_send_c(client%handle, step, c_string(name), &
                   int(dtype, c_int), data, count)), 'mt_send', ierr)
  end subroutine

  subroutine send_f32(client, time_step, name, array, ierr)
    type(mt_client_t), intent(inout) :: client
    class(*), intent(in) :: time_step
    character(len=*), intent(in) :: name
    real(c_float), dimension(..), intent(in), target :: array
    integer, intent(out), optional :: ierr
    call send_raw(client, time_step, name, MT_FLOAT32, c_loc(array), &
                  int(size(array), c_int64_t), is_contiguous(array), ierr)
  end subroutine

  subroutine send_f64(client, time_step, name, array, ierr)
    type(mt_client_t), intent(inout) :: client
    class(*), intent(in) :: time_step
    character(len=*), intent(in) :: name
    real(c_double), dimension(..), intent(in), target :: array
    integer, intent(out), optional :: ierr
    call send_raw(client, time_step, name, MT_FLOAT64, c_loc(array), &
                  int(size(array), c_int64_t), is_contiguous(array), ierr)
  end subroutine

  subroutine send_i8(client, time_step, name, array, ierr)
    type(mt_client_t), intent(inout) :: client
    class(*), intent(in) :: time_step
    character(len=*), intent(in) :: name
    integer(c_int8_t), dimension(..), intent(in), target :: array
    integer, intent(out), optional :: ierr
    call send_raw(client, time_step, name, MT_INT8, c_loc(array), &
                  int(size(array), c_int64_t), is_contiguous(array), ierr)
  end subroutine

  subroutine send_i16(client, time_step, name, array, ierr)
    type(mt_client_t), intent(inout) :: client
    class(*), intent(in) :: time_step
    character(len=*), intent(in) :: name
    integer(c_int16_t), dimension(..), intent(in), target :: array
    integer, intent(out), optional :: ierr
    call send_raw(client, time_step, name, MT_INT16, c_loc(array), &
                  int(size(array), c_int64_t), is_contiguous(array), ierr)
  end subroutine

  subroutine send_i32(client, time_step, name, array, ierr)
    type(mt_client_t), intent(inout) :: client
    class(*), intent(in) :: time_step
    character(len=*), intent(in) :: name
    integer(c_int32_t), dimension(..), intent(in), target :: array
    integer, intent(out), optional :: ierr
    call send_raw(client, time_step, name, MT_INT32, c_loc(array), &
                  int(size(array), c_int64_t), is_contiguous(array), ierr)
  end subroutine

  subroutine send_i64(client, time_step, name, array, ierr)
    type(mt_client_t), intent(inout) :: client
    class(*), intent(in) :: time_step
    character(len=*), intent(in) :: name
    integer(c_int64_t), dimension(..), intent(in), target :: array
    integer, intent(out), optional :: ierr
    call send_raw(client, time_step, name, MT_INT64, c_loc(array), &
                  int(size(array), c_int64_t), is_contiguous(array), ierr)
  end subroutine

  subroutine send_bool(client, time_step, name, array, ierr)
    type(mt_client_t), intent(inout) :: client
    class(*), intent(in) :: time_step
    character(len=*), intent(in) :: name
    logical(c_bool), dimension(..), intent(in), target :: array
    integer, intent(out), optional :: ierr
    call send_raw(client, time_step, name, MT_BOOL, c_loc(array), &
                  int(size(array), c_int64_t), is_contiguous(array), ierr)
  end subroutine

  !> Send the batches held now (they otherwise leave within the batch delay).
  subroutine mt_flush(client, ierr)
    type(mt_client_t), intent(inout) :: client
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_flush_c(client%handle)), 'mt_flush', ierr)
  end subroutine

  !> Flush, send BYE, wait for delivery, free the C client (in every case). The message
  !> of an error (mt_error_message(client)) is the C client's: for MT_ESIMREFUSED, the
  !> receiver's reason for refusing the simulation (or its samples, all non-finite) and
  !> the fix; in external mode, MT_ETIMEDOUT when the trainer did not confirm the BYE (it
  !> died or restarted: the last steps may be lost; run the simulation again with the
  !> same MELISSA_TRAINER_SIMULATION_ID). See mt_client_close in melissa_trainer.h.
  subroutine mt_close(client, ierr)
    type(mt_client_t), intent(inout) :: client
    integer, intent(out), optional :: ierr
    integer :: status
    character(kind=c_char), target :: message(16384) ! (a close message may pass 1 KiB)
    message = c_null_char
    ! The C client is freed whatever happened: its message comes back in `message`.
    status = int(mt_client_close_message_c(client%handle, message, &
                                           int(size(message), c_size_t)))
    client%handle = c_null_ptr
    call mt_finish(client, status, 'mt_close', ierr, f_string(c_loc(message)))
  end subroutine

  !> The run failed, what it sent is kept (mt_client_fail in melissa_trainer.h): writes
  !> `reason` ('': nothing) to stderr, sends what is batched and delivers what is queued
  !> (within mt_set_failed_close_timeout in all), frees the C client, sends no BYE (the
  !> trainer trains on what it received, does not count the simulation finished). Then
  !> end the program with a non-zero status (error stop) so that a launcher counts it
  !> failed. ierr: MT_OK once delivered, else the close's error (MT_ETIMEDOUT: what was
  !> not delivered, to whom).
  subroutine mt_fail(client, reason, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: reason
    integer, intent(out), optional :: ierr
    integer :: status
    character(kind=c_char), target :: message(16384) ! (a close message may pass 1 KiB)
    message = c_null_char
    status = int(mt_client_fail_message_c(client%handle, c_string(reason), message, &
                                          int(size(message), c_size_t)))
    client%handle = c_null_ptr
    call mt_finish(client, status, 'mt_fail', ierr, f_string(c_loc(message)))
  end subroutine

  !> Free the client at once without BYE (the run failed), dropping what it still
  !> batches (mt_fail delivers it). No-op on a closed client.
  subroutine mt_abort(client)
    type(mt_client_t), intent(inout) :: client
    call mt_client_abort_c(client%handle)
    client%handle = c_null_ptr
  end subroutine

  ! -- accessors (after mt_start) -------------------------------------------------------

  !> The launcher's parameter `name` (MELISSA_TRAINER_PARAMETERS) or one set.
  subroutine mt_parameter(client, name, value, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: name
    real(c_double), intent(out) :: value
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_client_parameter_c(client%handle, c_string(name), value)), &
                   'mt_parameter', ierr)
  end subroutine

  function mt_simulation_id(client) result(id)
    type(mt_client_t), intent(in) :: client
    integer(c_int64_t) :: id
    id = mt_client_simulation_id_c(client%handle)
  end function

  !> The number of receivers W (time step t goes to receiver mod(t, W)).
  function mt_receivers(client) result(n)
    type(mt_client_t), intent(in) :: client
    integer :: n
    n = int(mt_client_receivers_c(client%handle))
  end function
end module melissa_trainer
